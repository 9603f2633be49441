"""The README's commands are the ones CI runs and the CLI accepts."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def readme_commands():
    return re.findall(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)


def test_ci_runs_the_readme_test_command_exactly():
    test_command = [c for c in readme_commands() if "pytest" in c]
    assert len(test_command) == 1
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command[0] in ci, f"{test_command[0]!r} is not a line of .ci/run"


def test_readme_main_command_is_the_lenet_job():
    main = [c for c in readme_commands() if "python -m pyconv lenet" in c]
    assert len(main) == 1 and "--batch 10000" in main[0]
