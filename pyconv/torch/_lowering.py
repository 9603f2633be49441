"""Inductor's lowering of the ops pyconv::conv2d / conv1d: a direct call of the op's kernel from the compiled code.

Without it inductor calls an op it has no lowering for through PyTorch's dispatcher
(`torch.ops.pyconv.conv2d.default(...)`), which enters Python twice a call (custom_op's autograd wrapper, then a
redispatch to the kernel): measured in a compiled efficientnet_b0 on the H200 host (batch 16), 98 us a call of
our op against 29 us for each of inductor's `extern_kernels.convolution` calls, and compiled forwards there are
bound by the host. Lowered, the generated code calls `extern_kernels.pyconv_conv2d(x, w, b, args=(...))`, the
way it calls cuDNN's convolution: the op's kernel with the same arguments, nothing between.

Registered from the ops' fake kernels (which run whenever something traces them) once inductor is imported, so
that importing pyconv.torch imports no part of inductor; a process that loads compiled code from inductor's
caches traces the model with dynamo first, which runs the fakes and so registers the extern kernels that code
calls. Inductor's lowering API is internal: where it differs from what this module expects (another PyTorch
version), nothing is registered and inductor calls the op through the dispatcher as before. The environment
variable PYCONV_TORCH_LOWERING=0 (read at the first trace) keeps the dispatcher's call in graphs compiled then.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch

_state = {"tried": False}


def ensure_registered() -> None:
    """Registers the lowerings once, if inductor is imported (cheap after the first call)."""
    if _state["tried"] or "torch._inductor" not in sys.modules:
        return
    _state["tried"] = True
    try:
        _register(with_lowerings=os.environ.get("PYCONV_TORCH_LOWERING", "1") != "0")
    except Exception as exc:  # an internal API that moved: the ops still work, through the dispatcher
        warnings.warn(f"pyconv.torch: inductor will call pyconv's conv ops through PyTorch's dispatcher (their "
                      f"lowering could not be registered with this PyTorch: {type(exc).__name__}: {exc})",
                      RuntimeWarning, stacklevel=2)


def _register(with_lowerings: bool) -> None:
    """The extern kernels always (code in inductor's caches, whose keys do not tell lowered graphs from others,
    may call them), the lowerings too where asked."""
    from torch._inductor import ir
    from torch._inductor.lowering import fallback_handler, register_lowering
    from torch._inductor.select_algorithm import ExternKernelChoice, extern_kernels
    from torch._inductor.virtualized import V

    from . import _op

    def lowering(op, kernel, name):
        # The kernel takes the op's arguments; the generated code passes the tensors, then the rest as one tuple
        # (a signature that follows the op's schema, which is part of the cached graphs' keys).
        def call(input, weight, bias=None, *, args):
            return kernel(input, weight, bias, *args)
        call.__name__ = call.__qualname__ = name
        if not with_lowerings:
            setattr(extern_kernels, name, call)
            return
        choice = ExternKernelChoice(call, name=name, has_out_variant=False)
        fallback = fallback_handler(op, add_to_fallback_set=False)

        def lower(input, weight, bias, *args):
            node = V.graph.current_node
            out, x, w = node.meta["val"], node.args[0].meta["val"], node.args[1].meta["val"]
            if any(not isinstance(s, int) for t in (out, x, w) for s in (*t.shape, *t.stride())):
                return fallback(input, weight, bias, *args)  # dynamic shapes: the dispatcher's call is exact
            # The kernel reads the operands in the layouts the op was traced with (dense NCHW or NHWC: copies of
            # other views are made where the kernel runs) and its result has the fake's strides.
            inputs = [ir.ExternKernel.require_exact_strides(input, x.stride()),
                      ir.ExternKernel.require_exact_strides(weight, w.stride())]
            if bias is not None:
                inputs.append(ir.ExternKernel.require_contiguous(bias))
            layout = ir.FixedLayout(out.device, out.dtype, list(out.shape), list(out.stride()))
            return choice.bind(inputs, layout, args=tuple(args)).output_node()
        register_lowering(op, type_promotion_kind=None)(lower)

    lowering(torch.ops.pyconv.conv2d.default, _op._conv2d_kernel, "pyconv_conv2d")
    lowering(torch.ops.pyconv.conv1d.default, _op._conv1d_kernel, "pyconv_conv1d")
