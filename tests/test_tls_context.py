"""The run's client verifies TLS with httpx's default settings, made once per CA bundle (tls_context): clients share
it while the bundle stays, and a bundle changed in place (same path) or another one named is loaded anew. Checked
against an HTTPS server on loopback with certificates made by the openssl command."""

from __future__ import annotations

import asyncio
import http.server
import os
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llm_ide.config import load_config
from llm_ide.endpoint import http_client, listed_models
from llm_ide.models import get_model


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b'{"data": [{"id": "m"}]}' if self.path.endswith("/models") else b"ok"  # an endpoint's model list
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https_url(tmp_path: Path) -> Iterator[str]:
    cert, key = certificate(tmp_path, "server")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def answers(url: str) -> str:
    """'ok', or 'unverified' when the client does not trust the server's certificate."""
    with http_client(5.0) as client:
        try:
            return client.get(url).text
        except httpx.ConnectError as error:
            assert "CERTIFICATE_VERIFY_FAILED" in str(error)
            return "unverified"


def test_clients_share_the_bundle_until_it_changes(
    https_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trusted = (tmp_path / "server.pem").read_bytes()
    other = certificate(tmp_path, "other")[0].read_bytes()
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(trusted)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert answers(https_url) == "ok" and listed_models(https_url, None, 5.0) == ["m"]  # the run's preflight too
    assert http_client(1.0).ssl_context is http_client(1.0).ssl_context
    bundle.write_bytes(other + b"\n")  # in place: the same path, another size
    assert answers(https_url) == "unverified" and listed_models(https_url, None, 5.0) is None
    bundle.write_bytes(trusted)
    os.utime(bundle, ns=(1, 1))  # the first size again, another time of change
    assert answers(https_url) == "ok"
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "other.pem"))  # another bundle named
    assert answers(https_url) == "unverified"
    monkeypatch.delenv("SSL_CERT_FILE")
    assert answers(https_url) == "unverified"  # certifi's bundle does not hold a self-signed certificate


@pytest.mark.parametrize("spec", ["m", "openai:m"])
def test_a_model_per_endpoint_loads_no_bundle_again_and_its_async_client_trusts_it(
    spec: str, https_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OpenAI models (by URL, and the provider's) get both clients from here: langchain would make an async one of
    its own for each endpoint, loading the bundle again (50-80 ms)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "server.pem"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    http_client(1.0)  # the bundle loaded once, and what langchain's OpenAI package loads as it is imported: its
    import langchain_openai.chat_models.base  # noqa: F401  # module's own (a CLI call made before defers the package)

    loads: list[object] = []
    default_context = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: loads.append(a) or default_context(*a, **k))
    settings = load_config("default").model
    models = [get_model(spec, settings, base_url=f"{https_url}v{number}") for number in range(3)]

    async def fetched(client: httpx.AsyncClient) -> str:
        return (await client.get(https_url)).text

    assert [asyncio.run(fetched(model.chat.http_async_client)) for model in models] == ["ok", "ok", "ok"]
    assert loads == []
