"""Checks of the Python sources themselves, on any machine (no GPU, no library needed)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_no_module_defines_a_top_level_name_twice():
    """A second top-level `def` or `class` of a name silently replaces the first: tests written against the first's
    signature then fail only where they run (problem_runner once held two `check_non_finite`s; the GPU tests of
    one failed with a TypeError while the machines without a GPU skipped them)."""
    twice = []
    for path in sorted([*ROOT.glob("pyconv/**/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("bench/*.py")]):
        seen = {}
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in seen:
                    twice.append(f"{path.relative_to(ROOT)}: {node.name} at lines {seen[node.name]} and {node.lineno}")
                seen[node.name] = node.lineno
    assert not twice, "defined twice: " + "; ".join(twice)
