"""The README's variant and results tables are the ones bench/readme_tables.py generates from the C capability
table (cuda/core/variants.def) and the committed bench summary: pure text, no GPU and no library needed."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_tables", REPO / "bench" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)

FIX = "regenerate them with `python bench/readme_tables.py --write`"


@pytest.mark.parametrize("name", sorted(readme_tables.TABLES))
def test_readme_table_is_the_generated_one(name):
    generated = readme_tables.TABLES[name]()
    assert readme_tables.readme_table(name) == generated, f"README.md's {name} table is out of step: {FIX}"


def test_every_variant_of_the_c_table_is_in_the_readme():
    names = [v["name"] for v in readme_tables.parse_variants(readme_tables.VARIANTS_DEF.read_text())]
    assert len(names) >= 10 and "cpu" in names and "direct" in names
    table = readme_tables.readme_table("variants")
    assert [line.split("|")[1].strip().strip("`") for line in table.splitlines()[2:]] == names
    for name in names:
        assert readme_tables.source_of(name) != "?", f"no conv_impl_{name} under cuda/variants/"


def test_parser_reads_commas_parentheses_and_joined_strings():
    text = """/* CONV_VARIANT(name, ...) in a comment is not a variant */
    CONV_VARIANT(a, 1, CONV_UNIT_TENSOR_TF32, 1e-3, CONV_DT_F32 | CONV_DT_F16, CONV_DT_ALL, CONV_LY_ALL,
                 CONV_WL_MCKK, CONV_EP_ALL, 0, 1, 0, "F(2x2, 3x3), " "joined: \\"quoted\\"")"""
    (v,) = readme_tables.parse_variants(text)
    assert v["name"] == "a" and v["unit"] == "CONV_UNIT_TENSOR_TF32" and v["dilation"] == "0"
    assert v["idea"] == 'F(2x2, 3x3), joined: "quoted"'
    assert readme_tables._bits(v["in_dt"], readme_tables.DTYPES) == ["f32", "f16"]


def test_results_table_names_the_gpu_and_every_suite():
    table = readme_tables.results_table()
    assert table.startswith(readme_tables.gpu_name() + ":")
    for suite in ("cnn5", "groups", "LeNet"):
        assert f"| {suite} |" in table


def test_large_kernel_table_has_a_row_for_every_suite_layer():
    """Each layer of the packaged large_kernel suite falls in one row of the README's large-kernel table (a layer
    added to the suite without a row would stop the table's generation), and a filter of no row is refused."""
    import csv

    with open(REPO / "pyconv" / "bench" / "suites" / "large_kernel.csv", newline="") as f:
        layers = list(csv.DictReader(f))
    assert len(layers) >= 20
    labels = {readme_tables.large_kernel_class(int(r["KH"]), int(r["KW"]), int(r["stride"])) for r in layers}
    assert labels == {label for label, _ in readme_tables.LARGE_KERNEL_CLASSES}
    with pytest.raises(ValueError, match="no row"):
        readme_tables.large_kernel_class(3, 3, 1)
