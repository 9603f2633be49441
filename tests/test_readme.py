"""The README's set-up commands are the ones CI runs, and they hold what a fresh machine needs."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The one place the README may use sudo: only where the user is not root (a root shell has no sudo).
SUDO_IF_NOT_ROOT = '$( [ "$(id -u)" = 0 ] || echo sudo ) '


def readme_commands():
    return re.findall(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)


def setup_commands():
    """(the first command: system packages, install, main job; the second: the tests)."""
    first = [c for c in readme_commands() if "pip install" in c]
    second = [c for c in readme_commands() if "pytest" in c]
    assert len(first) == 1 and len(second) == 1, "the README has one install command and one test command"
    return first[0], second[0]


def ci_lines():
    return (REPO / ".ci" / "run").read_text().splitlines()


def test_ci_runs_the_readme_commands_exactly():
    first, second = setup_commands()
    without_system_packages = first[first.index("python3 -m venv"):]
    assert without_system_packages in ci_lines(), f"{without_system_packages!r} is not a line of .ci/run"
    assert second in ci_lines(), f"{second!r} is not a line of .ci/run"


def test_readme_main_command_is_the_lenet_job():
    first, _ = setup_commands()
    assert first.endswith("&& python -m pyconv lenet --batch 10000")


def test_setup_works_as_root_and_as_a_user():
    first, second = setup_commands()
    assert first.startswith(SUDO_IF_NOT_ROOT)
    assert "sudo" not in first[len(SUDO_IF_NOT_ROOT):] + second, "a bare sudo fails in a root shell without sudo"
    assert "dataset-fashion-mnist" not in first, "the test set ships with the package; no apt data needed"


def test_library_is_compiled_once_with_progress_shown():
    first, second = setup_commands()
    assert re.search(r'pip install -v "\.\[test\]"', first), "-v: pip hides the compile's progress otherwise"
    assert "pip install" not in second, "a second pip install compiles the library again"
