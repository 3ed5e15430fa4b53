"""Runs mini-swe-agent (its text-based default config) on one task; executed by the interpreter of mini's own venv.

python bench_cost_mini.py TASK_FILE REPO OUTPUT_TRAJECTORY MODEL_NAME API_BASE
"""

import sys
from pathlib import Path

import yaml
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel


def main() -> None:
    task_file, repo, output, model_name, api_base = sys.argv[1:6]
    config = yaml.safe_load((Path(package_dir) / "config" / "default.yaml").read_text())
    model_config = config["model"]
    model_config["model_kwargs"] = {**model_config.get("model_kwargs", {}), "api_base": api_base, "api_key": "none"}
    model = LitellmTextbasedModel(model_name=f"openai/{model_name}", cost_tracking="ignore_errors", **model_config)
    env = LocalEnvironment(**{**config.get("environment", {}), "cwd": repo})
    agent = DefaultAgent(model, env, **{**config["agent"], "output_path": Path(output)})
    result = agent.run(Path(task_file).read_text())
    print(f"mini-swe-agent exit status: {result.get('exit_status')}, {agent.n_calls} calls")


if __name__ == "__main__":
    main()
