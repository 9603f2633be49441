"""bench/ncu_source_regions.py: an Nsight Compute source-counter CSV (SASS of one launch) summed over address
ranges, and the stall reasons of one range, on a small synthetic table."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("ncu_source_regions", REPO / "bench" / "ncu_source_regions.py")
regions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regions)

# ncu's own lines first, then the kernel's name, then the table (numbers with thousands separators, as ncu
# prints them)
CSV = '''==PROF== Connected to process 1
"Kernel Name","dwp_kernel",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_barrier","stall_wait","stall_barrier (Not Issued)"
"0x7f0000000000","IMAD R1, R2, R3, R4","10","1,000","0","10","0"
"0x7f0000000010","BAR.SYNC 0x0","60","1,000","60","0","20"
"0x7f0000000400","FFMA R1, R2, R3, R1","20","6,000","0","5","0"
"0x7f0000000410","@!P0 FFMA R5, R2, R3, R5","5","1,500","0","5","0"
"0x7f0000000420","LDS.128 R8, [R9]","5","500","0","0","0"
'''


def test_ranges_share_the_samples_and_instructions_and_name_their_ffma():
    table = regions.rows(CSV)
    assert len(table) == 5
    out = regions.regions(table, 0x400)
    assert [at for at, *_ in out] == [0, 0x400]
    at, samples, executed, ffma, top = out[1]
    assert samples == pytest.approx(30 / 100) and executed == pytest.approx(8000 / 10000)
    assert ffma == pytest.approx(7500 / 8000)  # the predicated FFMA counts as FFMA
    assert top[0] == ("FFMA", 7500)
    assert out[0][3] == 0.0 and out[0][1] == pytest.approx(0.7)


def test_stalls_of_a_range_leave_out_the_not_issued_copies():
    table = regions.rows(CSV)
    assert regions.stalls(table, 0, 0x400) == [("barrier", 60.0), ("wait", 10.0)]
    assert regions.stalls(table, 0x400, 0x800) == [("wait", 10.0), ("barrier", 0.0)]


def test_a_csv_without_the_source_page_is_refused_in_words():
    with pytest.raises(ValueError, match="--page source"):
        regions.rows("==PROF== nothing profiled\n")
