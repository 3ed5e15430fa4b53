"""`debugger start|stop|status` and `debugger-commands CMD...` (also `debugger commands CMD...`)."""

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from llm_ide_debugger import common, targets

PREFIX = common.PREFIX
DEFAULT_COMMAND_TIMEOUT = 10.0
DEFAULT_START_TIMEOUT = 60.0
CONNECT_WAIT = 15.0
NO_SESSION = (
    f"{PREFIX} No debugging session is running. Start one with `debugger start TARGET`"
    " (a script path with its arguments, a pytest node id such as tests/test_x.py::test_y, or -m module)."
)
START_OPTIONS = {"--python": str, "--timeout": float, "--state-dir": str, "--idle-timeout": float}
USAGE = """usage: debugger start [--python PY] [--timeout S] [--pytest] TARGET [ARGS...]
       debugger-commands [--timeout S] "b path.py:12" "c" "p x" "where"   (or: debugger commands ...)
       debugger status | debugger stop

TARGET: a script path (its arguments follow), `-m module ARGS`, or pytest: a node id (tests/test_x.py::test_y),
a test file, or `pytest ARGS`. A pytest session stops at the start of the selected test; a failing test (or a
script's uncaught exception) enters post-mortem debugging. Each command runs in the same live pdb session;
one that does not stop within --timeout seconds (default 10) gets the program interrupted where it is.
The program runs with --python, else $DEBUGGER_PYTHON, else `python3` on PATH (as your shell would run it).
Options for all: --state-dir DIR (default: $DEBUGGER_STATE_DIR or a temp dir per installation)."""


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def process_alive(pid: int) -> bool:
    if not common.pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def live_session(directory: str) -> "dict | None":
    session = common.read_session(directory)
    if session and process_alive(int(session["pid"])):
        return session
    if session:
        remove_session_files(directory, session)
    return None


def remove_session_files(directory: str, session: dict) -> None:
    for path in (session.get("socket"), common.session_file(directory)):
        try:
            if path:
                os.unlink(path)
        except OSError:
            pass


def kill_session(directory: str, session: dict) -> None:
    pid = int(session["pid"])
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 5
    while process_alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    remove_session_files(directory, session)


def request(session: dict, payload: dict, timeout: float) -> "dict | None":
    try:
        return common.send_request(session["socket"], payload, timeout)
    except (OSError, ValueError):
        return None


def print_results(results: "list[dict]") -> None:
    for result in results:
        if result.get("command") is not None:
            print("(Pdb) " + result["command"])
        output = result.get("output", "").strip("\n")
        if output:
            print(output)
    sys.stdout.flush()


def split_start_arguments(words: "list[str]") -> "tuple[dict, list[str]]":
    options = {"pytest": False}  # type: dict
    index = 0
    while index < len(words):
        word = words[index]
        name, _, inline = word.partition("=")
        if word == "--":
            index += 1
            break
        if word == "--pytest":
            options["pytest"] = True
        elif name in START_OPTIONS:
            value = inline if inline else (words[index + 1] if index + 1 < len(words) else "")
            index += 0 if inline else 1
            try:
                options[name[2:].replace("-", "_")] = START_OPTIONS[name](value)
            except ValueError:
                raise targets.TargetError(f"{name} needs a {START_OPTIONS[name].__name__} value") from None
        else:
            break
        index += 1
    return options, words[index:]


def package_path_dir(directory: str) -> str:
    """A directory holding only this package (a symlink), for PYTHONPATH when another interpreter runs the target."""
    holder = os.path.join(directory, "pythonpath")
    link = os.path.join(holder, "llm_ide_debugger")
    os.makedirs(holder, exist_ok=True)
    if not os.path.islink(link):
        os.symlink(os.path.dirname(os.path.abspath(__file__)), link)
    return holder


def project_python(explicit: "str | None") -> str:
    """The interpreter the program runs with: --python, $DEBUGGER_PYTHON, else `python3` (or `python`) on PATH as the
    shell would run it, unless that is this installation's own environment; else the interpreter running this."""
    chosen = explicit or os.environ.get("DEBUGGER_PYTHON")
    if chosen:
        return chosen
    own = os.path.abspath(sys.prefix) + os.sep
    for name in ("python3", "python"):
        found = shutil.which(name)
        if found and not os.path.abspath(found).startswith(own):
            return found
    return sys.executable


def start(words: "list[str]") -> int:
    options, target_words = split_start_arguments(words)
    directory = common.state_dir(options.get("state_dir"))
    spec = targets.parse_target(target_words, options["pytest"])
    os.makedirs(directory, mode=0o700, exist_ok=True)
    root = os.getcwd()
    spec["root"] = root
    spec["target"] = " ".join(target_words)
    spec["breakpoints"] = [entry for node in spec["pytest_ids"] for entry in targets.test_entry_lines(node, root)]
    previous = live_session(directory)
    if previous:
        kill_session(directory, previous)
        print(f"{PREFIX} Stopped the previous session ({previous.get('target')}).")
    python = project_python(options.get("python"))
    environment = dict(os.environ)
    if python != sys.executable:
        paths = [package_path_dir(directory)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else [])
        environment["PYTHONPATH"] = os.pathsep.join(paths)
    bootstrap = "import sys; sys.path.pop(0); from llm_ide_debugger.server import main; main()"
    command = [python, "-c", bootstrap, "--state-dir", directory, "--spec", json.dumps(spec)]
    if options.get("idle_timeout"):
        command += ["--idle-timeout", str(options["idle_timeout"])]
    log_path = os.path.join(directory, "server.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    session = wait_for_server(directory, process)
    if session is None:
        with open(log_path, "rb") as log:
            details = log.read()[-4000:].decode("utf-8", "replace").strip()
        print(f"{PREFIX} The debugger did not start ({python}):\n{details}")
        return 1
    timeout = options.get("timeout") or env_float("DEBUGGER_START_TIMEOUT", DEFAULT_START_TIMEOUT)
    response = request(session, {"op": "wait", "commands": [], "timeout": timeout}, timeout + 30)
    if response is None:
        print(f"{PREFIX} The session of {spec['target']} stopped answering.")
        return 1
    print(f"{PREFIX} Started {spec['target']} (pid {session['pid']}).")
    print_results(response["results"])
    return 0


def wait_for_server(directory: str, process: subprocess.Popen) -> "dict | None":
    deadline = time.time() + CONNECT_WAIT
    while time.time() < deadline:
        session = common.read_session(directory)
        if session and session.get("pid") == process.pid:
            return session
        if process.poll() is not None:
            return None
        time.sleep(0.02)
    process.kill()
    return None


def stop(directory: str) -> int:
    session = live_session(directory)
    if session is None:
        print(f"{PREFIX} No debugging session is running.")
        return 0
    kill_session(directory, session)
    print(f"{PREFIX} Stopped the session of {session.get('target')} (pid {session['pid']}).")
    return 0


def status(directory: str) -> int:
    session = live_session(directory)
    answer = request(session, {"op": "status"}, 10) if session else None
    if session is None or answer is None:
        print(NO_SESSION)
        return 1
    states = {"prompt": "paused", "ended": "ended", "starting": "starting"}
    state = states.get(answer["state"], "running")
    print(f"{PREFIX} Session of {session['target']} (pid {session['pid']}): {state}")
    if answer.get("location"):
        print("> " + answer["location"])
    return 0


def send_commands(commands: "list[str]", timeout: float, directory: str) -> int:
    session = live_session(directory)
    if session is None:
        print(NO_SESSION)
        return 1
    budget = len(commands) * (2 * timeout + 10) + 30
    response = request(session, {"op": "commands", "commands": commands, "timeout": timeout}, budget)
    if response is None:
        print(f"{PREFIX} The session of {session.get('target')} did not answer; `debugger stop` ends it.")
        return 1
    print_results(response["results"])
    return 0


def commands_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run pdb commands in the live debugging session.")
    parser.add_argument(
        "--timeout",
        type=float,
        default=env_float("DEBUGGER_TIMEOUT", DEFAULT_COMMAND_TIMEOUT),
        help="seconds a command may run before the program is interrupted (default 10)",
    )
    parser.add_argument("--state-dir", default=None)
    parser.add_argument("commands", nargs="+", help='pdb commands, e.g. "b app.py:12" "c" "p x" "where"')
    return parser


def commands_main(argv: "list[str] | None" = None, prog: str = "debugger-commands") -> int:
    args = commands_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    return send_commands(args.commands, args.timeout, common.state_dir(args.state_dir))


def main(argv: "list[str] | None" = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if not words or words[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if words else 2
    action, rest = words[0], words[1:]
    try:
        if action == "start":
            return start(rest)
        if action == "commands":
            return commands_main(rest, prog="debugger commands")
        if action in ("stop", "status"):
            parser = argparse.ArgumentParser(prog="debugger " + action)
            parser.add_argument("--state-dir", default=None)
            directory = common.state_dir(parser.parse_args(rest).state_dir)
            return stop(directory) if action == "stop" else status(directory)
    except targets.TargetError as error:
        print(f"{PREFIX} {error}")
        return 2
    print(f"{PREFIX} unknown action {action!r}\n{USAGE}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
