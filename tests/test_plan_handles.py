"""C plan handles are checked, never trusted: a destroyed plan, a plan destroyed twice, and a pointer
that conv2d_plan_create never returned are refused with CONV_ERR_INVALID_ARGUMENT by every plan function
(a second destroy aborted the process in glibc; a destroyed plan used again segfaulted or returned
CONV_OK). A plan destroyed while another thread's launch reads it lives until that launch returns."""
import threading

import numpy as np
import pytest

from oracle import conv2d_reference
from pyconv._lib import ConvError, check, ffi, lib
from pyconv._problem import make_problem
from pyconv.api import variant_id

PLAN_FUNCTIONS = ("conv2d_plan_get_info", "conv2d_plan_run", "conv2d_plan_launch", "conv2d_plan_destroy")


def _plan(variant: str = "cpu", B: int = 2):
    problem, _, out_shape = make_problem((B, 3, 12, 12), (4, 3, 3, 3), padding=1)
    out = ffi().new("conv_plan**")
    check(lib().conv2d_plan_create(variant_id(variant), problem, ffi().NULL, -1, out))
    return out[0], out_shape


def _call(name: str, plan, arrays=None) -> int:
    f, l = ffi(), lib()
    if name == "conv2d_plan_get_info":
        return l.conv2d_plan_get_info(plan, f.new("conv_plan_info*"))
    if name == "conv2d_plan_destroy":
        return l.conv2d_plan_destroy(plan)
    x, w, y = arrays or (np.ones((2, 3, 12, 12), np.float32), np.ones((4, 3, 3, 3), np.float32),
                         np.empty((2, 4, 12, 12), np.float32))
    ptr = lambda a: f.cast("void*", a.ctypes.data)  # noqa: E731
    return getattr(l, name)(plan, ptr(x), ptr(w), f.NULL, ptr(y), f.NULL, 0, f.NULL)


def _refused(status: int, what: str) -> None:
    with pytest.raises(ConvError, match=what):
        check(status)


@pytest.mark.parametrize("function", PLAN_FUNCTIONS)
def test_a_destroyed_plan_is_refused(function):
    plan, _ = _plan()
    check(lib().conv2d_plan_destroy(plan))
    _refused(_call(function, plan), "not a live plan")


@pytest.mark.parametrize("function", PLAN_FUNCTIONS)
def test_a_foreign_pointer_is_refused(function):
    not_a_plan = ffi().new("char[4096]")  # readable memory that is no plan
    _refused(_call(function, ffi().cast("conv_plan*", not_a_plan)), "not a live plan")
    _refused(_call(function, ffi().cast("conv_plan*", 0x10)), "not a live plan")


@pytest.mark.parametrize("function", PLAN_FUNCTIONS[:3])
def test_a_null_plan_is_refused(function):
    _refused(_call(function, ffi().NULL), "plan is NULL")


def test_destroying_null_is_a_no_op_and_live_plans_still_work(rng):
    check(lib().conv2d_plan_destroy(ffi().NULL))
    plans = [_plan()[0] for _ in range(300)]  # the table grows past its first size
    for plan in plans[::2]:
        check(lib().conv2d_plan_destroy(plan))
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    for plan in plans[1::2]:
        y = np.full((2, 4, 12, 12), np.nan, np.float32)
        check(_call("conv2d_plan_launch", plan, (x, w, y)))
        np.testing.assert_allclose(y, conv2d_reference(x, w, padding=(1, 1)), rtol=1e-5, atol=1e-5)
        check(lib().conv2d_plan_destroy(plan))
        _refused(_call("conv2d_plan_launch", plan, (x, w, y)), "not a live plan")


def test_destroy_while_other_threads_launch_the_plan(rng):
    """Threads launch one plan while the main thread destroys it: every launch either completes with the
    right result or is refused as 'not a live plan'; nothing crashes."""
    x = rng.standard_normal((16, 3, 12, 12)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    expected = conv2d_reference(x, w, padding=(1, 1))
    for _ in range(20):
        plan, _ = _plan(B=16)
        outcomes, start = [], threading.Barrier(5)

        def launch():
            y = np.full((16, 4, 12, 12), np.nan, np.float32)
            start.wait()
            for _ in range(5):
                status = _call("conv2d_plan_launch", plan, (x, w, y))
                outcomes.append("refused" if status else bool(np.allclose(y, expected, rtol=1e-5, atol=1e-5)))

        threads = [threading.Thread(target=launch) for _ in range(4)]
        for t in threads:
            t.start()
        start.wait()
        check(lib().conv2d_plan_destroy(plan))
        for t in threads:
            t.join()
        assert set(outcomes) <= {True, "refused"}, outcomes
