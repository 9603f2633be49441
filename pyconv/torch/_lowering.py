"""Inductor's lowering of the ops pyconv::conv2d / conv1d: a direct call of the op's kernel from the compiled code.

Without it inductor calls an op it has no lowering for through PyTorch's dispatcher
(`torch.ops.pyconv.conv2d.default(...)`), which enters Python twice a call (custom_op's autograd wrapper, then a
redispatch to the kernel): measured in a compiled efficientnet_b0 on the H200 host (batch 16), 98 us a call of
our op against 29 us for each of inductor's `extern_kernels.convolution` calls, and compiled forwards there are
bound by the host. Lowered, the generated code calls `extern_kernels.pyconv_conv2d(x, w, b, args=(...),
site='...')`, the way it calls cuDNN's convolution: the op's kernel with the same arguments, nothing between;
from its second call a site runs the plan its first call found (_sites), without the engine's lookup.

Registered from the ops' fake kernels (which run whenever something traces them) once inductor is imported, so
that importing pyconv.torch imports no part of inductor; a process that loads compiled code from inductor's
caches traces the model with dynamo first, which runs the fakes and so registers the extern kernels that code
calls. Inductor's lowering API is internal: where it differs from what this module expects (another PyTorch
version), nothing is registered and inductor calls the op through the dispatcher as before; so it does with
symbolic sizes and in C++ wrappers (cpp_wrapper, AOTInductor), which reach Python kernels only that way. The
environment variable PYCONV_TORCH_LOWERING=0 (read at the first trace) keeps the dispatcher's call in graphs
compiled then.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch

from . import _engine
from ._fallback import torch_conv

_state = {"tried": False}
# A lowered conv2d's call site (the string the generated code passes: everything static about its operands and
# arguments, a str so that its hash is computed once) -> (our plan's engine entry, its device, the TF32 flag it
# was made under or None), or (None, Spec, memory format) for PyTorch's conv: later calls skip the engine's key,
# which costs more than the rest of a call; or _FULL_PATH where every call takes the engine's path (it is not
# looked at again). _engine.clear() and a fork forget them with the engine's entries.
_sites = _engine.sites
_FULL_PATH = ()


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

    def lowering(op, kernel, name, out_variant):
        # The kernel takes the op's arguments; the generated code passes the tensors, then the rest as one tuple
        # (a signature that follows the op's schema, which is part of the cached graphs' keys), and for conv2d
        # its call site (None for conv1d, whose views the engine's entry does not describe) and the output
        # buffer inductor allocated (or reused) for it, which a site's plan writes in place: x.new_empty was
        # ~7 of the ~17 us a lowered call cost the H200 host, where inductor's own allocation is a fast path.
        def call(input, weight, bias=None, *, args, site=None, out=None):
            hit = _sites.get(site)
            if hit is None or hit is _FULL_PATH:
                y = kernel(input, weight, bias, *args)
                if hit is None and site is not None:
                    if len(_sites) > 4096:  # graphs compiled and dropped over a long process: their sites go too
                        _sites.clear()
                    _sites[site] = _fast_path(input, weight, bias, args, out)
            elif hit[0] is None:  # PyTorch's conv, as engine "fastest" decided for these operands
                y = torch_conv(input, weight, bias, hit[1]).contiguous(memory_format=hit[2])
            elif hit[2] is None or hit[2] == _engine._cudnn_allow_tf32():
                return _engine._run(hit[0], input, weight, bias, hit[1], out)
            else:  # our plan, made under the other TF32 flag
                y = kernel(input, weight, bias, *args)
            if out is None:
                return y
            out.copy_(y)
            return out
        call.__name__ = call.__qualname__ = name
        if not with_lowerings:
            setattr(extern_kernels, name, call)
            return
        choice = ExternKernelChoice(call, name=name, has_out_variant=out_variant)
        fallback = fallback_handler(op, add_to_fallback_set=False)

        def lower(input, weight, bias, *args):
            node = V.graph.current_node
            out, x, w = node.meta["val"], node.args[0].meta["val"], node.args[1].meta["val"]
            # Symbolic sizes, and C++ wrappers (cpp_wrapper, AOTInductor), which call a Python kernel only through
            # the dispatcher: the op's call.
            static = all(isinstance(s, int) for t in (out, x, w) for s in (*t.shape, *t.stride()))
            if V.graph.cpp_wrapper or not static:
                return fallback(input, weight, bias, *args)
            # The kernel reads the operands in the layouts the op was traced with (dense NCHW or NHWC: copies of
            # other views are made where the kernel runs) and its result has the fake's strides. (In a graph whose
            # aten convs inductor runs channels-last, taking NHWC as they do saved its copies but had the engine
            # decide again for NHWC operands inside the compiled model: googlenet 1.14x, efficientnet_b0 1.27x
            # the original's time on the H200, against 0.83x and 1.02x in the traced layouts.)
            inputs = [ir.ExternKernel.require_exact_strides(input, x.stride()),
                      ir.ExternKernel.require_exact_strides(weight, w.stride())]
            if bias is not None:
                inputs.append(ir.ExternKernel.require_contiguous(bias))
            layout = ir.FixedLayout(out.device, out.dtype, list(out.shape), list(out.stride()))
            args = tuple(args)
            site = None
            if op is torch.ops.pyconv.conv2d.default:
                b = node.args[2].meta["val"] if bias is not None else None
                site = repr((args, tuple(x.shape), x.stride(), x.dtype, tuple(w.shape), w.stride(), w.dtype,
                             None if b is None else (tuple(b.shape), b.dtype), str(x.device)))
            return choice.bind(inputs, layout, args=args, site=site).output_node()
        register_lowering(op, type_promotion_kind=None)(lower)

    # conv2d's sites write into inductor's buffer; conv1d has no sites (each call would add a copy): it allocates
    lowering(torch.ops.pyconv.conv2d.default, _op._conv2d_kernel, "pyconv_conv2d", True)
    lowering(torch.ops.pyconv.conv1d.default, _op._conv1d_kernel, "pyconv_conv1d", False)


def _fast_path(x, w, b, args, out=None) -> tuple:
    """After a site's call through the engine: what its later calls run, the entry where it runs our plan the
    same way at every call (the compiled graph's operands keep the metadata the site names), (None, Spec, memory
    format) where it runs PyTorch's conv (engine "fastest" or "torch"); _FULL_PATH for refusals, entries that
    capture another engine, views the engine copies and an output buffer (out) whose strides place values where
    the plan's y would not."""
    from . import _op
    spec = _op._spec(*args)
    pick = _engine.remembered(x, w, b, spec)
    if pick is None or pick.captured:
        return _FULL_PATH
    if pick.entry is None:
        return None, spec, pick.memory_format
    if not (_op._layout_is(x, pick.x_nhwc) and _op._layout_is(w, pick.w_nhwc) and (b is None or b.is_contiguous())):
        return _FULL_PATH  # a view the engine copies at each call (its entry is for the dense copy)
    if out is not None and not _same_placement(out, pick.entry):
        return _FULL_PATH
    tf32 = None
    if spec.precision == "default" and x.dtype is torch.float32 and x.is_cuda:
        tf32 = pick.precision == "tf32"
    return pick.entry, x.get_device(), tf32


def _same_placement(out, entry) -> bool:
    """Whether `out` holds each element where the entry's plan writes y: the same shape, dtype and device, dense
    in the entry's memory format (PyTorch's contiguity ignores the strides of dimensions of length 1)."""
    return (out.shape == entry.out_shape and out.dtype == entry.dtype and out.device == entry.device
            and out.is_contiguous(memory_format=entry.memory_format))
