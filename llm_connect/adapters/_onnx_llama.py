"""A llama-architecture GGUF model converted once to ONNX and run on onnxruntime: the embedded judge, fast to start.

Reading the GGUF with transformers takes about 20 s (dequantising it and rebuilding its tokenizer), and
``import torch, transformers`` alone about 3 s, before any weight is read. So the model is converted once:
transformers dequantises the GGUF to float32 (:func:`convert`), and the weights are written, 64 KiB aligned,
beside a small ONNX graph of the decoder (:func:`write_graph`), with the tokenizer as ``tokenizer.json`` and
the chat template in the manifest. The entry is kept in the converted-model cache (``_model_cache``:
``$LLM_CONNECT_CACHE_DIR``, default the user cache directory), keyed by the GGUF's content hash and the
versions of the libraries that wrote it.

Later processes load it with onnxruntime (imported in a few tenths of a second, no torch): the weights are
memory-mapped from the cache (onnxruntime maps aligned external data) and the layers' matrices packed for its
GEMM kernels, the tokenizer is read by ``tokenizers`` and the chat template rendered with jinja2 as
transformers renders it. :class:`OnnxLlama` runs one forward pass over new tokens given the KV cache of the
ones before (``past``) and returns the last position's logits and the extended KV cache; the adapter
(``TransformersAdapter``) does the sampling, the logprobs and the prefix reuse on numpy.

The graph: token embedding, then per layer RMSNorm, one fused q/k/v projection, rotary embedding (cos/sin given
as inputs, from float64), grouped-query attention over ``past + new`` with an additive causal mask (given as an
input), the output projection, RMSNorm and the SwiGLU MLP (one fused gate/up projection); the final RMSNorm and
the (tied) output projection of the last position only. It covers the llama family as transformers loads it
from GGUF (llama, mistral without a sliding window, qwen2 with its q/k/v biases): SmolLM2 among them.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from ..errors import DISTRIBUTION, ConfigError, MissingDependencyError, module_installed

__all__ = ["OnnxLlama", "convert", "load_model", "missing_for_runtime", "writer_versions"]

#: what running a converted model needs: (module, package)
RUNTIME = (("numpy", "numpy"), ("onnxruntime", "onnxruntime"), ("tokenizers", "tokenizers"), ("jinja2", "jinja2"))
#: what converting a GGUF file needs (once per model file and library versions)
CONVERTER = (("torch", "torch"), ("transformers", "transformers"), ("gguf", "gguf"), ("accelerate", "accelerate"),
             ("onnx", "onnx"))
#: the packages whose versions key a converted model (they write it)
WRITERS = ("transformers", "gguf", "torch", "tokenizers", "onnx")
GRAPH = "model.onnx"
WEIGHTS = "weights.bin"
TOKENIZER = "tokenizer.json"
#: external data offsets are aligned to this, so onnxruntime can map the weights rather than copy them
ALIGN = 1 << 16
OPSET = 17


def missing_for_runtime() -> str | None:
    """The first package running or converting the model needs that is not installed (``None``: all are)."""
    return next((package for module, package in (*RUNTIME, *CONVERTER) if not module_installed(module)), None)


def writer_versions() -> dict[str, str]:
    """What writes a converted model, part of its cache key: the installed versions of the packages that
    convert it, and this module's own source (its hash: any change to the graph or the conversion builds
    new entries, even between releases)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in WRITERS:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "missing"
    try:
        found["converter"] = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    except OSError:  # no source beside the bytecode: the package's version stands for it
        try:
            found["converter"] = version(DISTRIBUTION)
        except PackageNotFoundError:
            found["converter"] = "unknown"
    return found


# -- converting a GGUF file ------------------------------------------------------------------------------

_SUPPORTED = ("llama", "mistral", "qwen2")


def _architecture(config: Any, name: str) -> dict[str, Any]:
    """What the graph needs from a transformers config, refused with the fix when the model is not of the
    llama family the graph implements."""
    kind = getattr(config, "model_type", "?")
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
    theta = (rope.get("rope_theta") if isinstance(rope, dict) else None) or getattr(config, "rope_theta", None)
    sliding = getattr(config, "sliding_window", None) if getattr(config, "use_sliding_window", True) else None
    if kind not in _SUPPORTED or getattr(config, "hidden_act", "silu") != "silu" or rope_type != "default" \
            or sliding is not None or theta is None:
        raise ConfigError(
            f"TransformersAdapter: {name} is a {kind} model (rope {rope_type}, sliding window {sliding}); the "
            f"embedded runtime converts llama-family models ({', '.join(_SUPPORTED)}, default rope, no sliding "
            "window): run this one with LlamaCppAdapter (pip install -e '.[llama]')")
    heads = int(config.num_attention_heads)
    hidden = int(config.hidden_size)
    return {"model_type": kind, "layers": int(config.num_hidden_layers), "hidden": hidden, "heads": heads,
            "kv_heads": int(getattr(config, "num_key_value_heads", None) or heads),
            "head_dim": int(getattr(config, "head_dim", None) or hidden // heads),
            "intermediate": int(config.intermediate_size), "vocab": int(config.vocab_size),
            "eps": float(config.rms_norm_eps), "rope_theta": float(theta),
            "max_positions": int(getattr(config, "max_position_embeddings", 0) or 0),
            "tied": bool(getattr(config, "tie_word_embeddings", False))}


def convert(source: Path, out: Path) -> dict[str, Any]:
    """Convert the GGUF file ``source`` into ``out``: the graph and weights, and ``tokenizer.json``.

    Parameters
    ----------
    source
        A GGUF file transformers can read (a llama-family chat model).
    out
        An empty directory.

    Returns
    -------
    dict
        What the manifest records: the architecture, the chat template and the tokens it names, the end-of-turn
        token ids.

    Raises
    ------
    MissingDependencyError
        When a package the conversion needs is not installed.
    ConfigError
        When the model has no chat template or is not of the llama family.
    """
    missing = next((package for module, package in CONVERTER if not module_installed(module)), None)
    if missing is not None:
        raise MissingDependencyError(missing, "local", "converting the embedded LLM's GGUF file (once)")
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ._local import _quiet_transformers

    # transformers' GGUF loader draws its own progress bar: kept off the user's screen
    with _quiet_transformers(), contextlib.redirect_stderr(io.StringIO()):
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name, local_files_only=True)
        template = getattr(tokenizer, "chat_template", None)
        if not template or not isinstance(template, str):
            raise ConfigError(f"TransformersAdapter: {source.name} has no chat template; give a chat (instruct) "
                              "model")
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                     local_files_only=True, dtype=torch.float32)
    arch = _architecture(model.config, source.name)
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = sorted({int(t) for t in [tokenizer.eos_token_id, *(configured if isinstance(configured, list) else
                                                             [configured])] if isinstance(t, int)})
    backend = tokenizer.backend_tokenizer
    backend.save(str(out / TOKENIZER))
    state = {name: tensor.detach().to(torch.float32).numpy() for name, tensor in model.state_dict().items()}
    del model
    write_graph(out, arch, state)
    clean_up = bool(getattr(tokenizer, "clean_up_tokenization_spaces", False)) and \
        type(backend.model).__name__ != "BPE"  # transformers skips the clean-up for BPE tokenizers
    return {**arch, "chat_template": template, "template_tokens": dict(tokenizer.special_tokens_map),
            "eos": eos, "clean_up_spaces": clean_up, "float": np.dtype(np.float32).name}


def write_graph(out: Path, arch: dict[str, Any], state: dict[str, Any]) -> None:
    """Write the decoder's ONNX graph (``model.onnx``) and its weights (``weights.bin``, external data) into ``out``.

    ``state`` is the model's float32 state dict (transformers' names). Inputs: ``input_ids`` (1 x T),
    ``cos`` and ``sin`` (T x head_dim), ``mask`` (heads/kv_heads * T x P+T, additive), and per layer
    ``past_key_<i>``, ``past_value_<i>`` (1 x kv_heads x P x head_dim). Outputs: ``logits`` (1 x vocab, the
    last position) and ``present_key_<i>``, ``present_value_<i>`` (1 x kv_heads x P+T x head_dim).
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    layers, heads, kv, dim = arch["layers"], arch["heads"], arch["kv_heads"], arch["head_dim"]
    hidden, ff = arch["hidden"], arch["intermediate"]
    expected = {"model.embed_tokens.weight", "model.norm.weight"} | ({"lm_head.weight"} if not arch["tied"] else set())
    for i in range(layers):
        p = f"model.layers.{i}."
        expected |= {p + s for s in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                     "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                     "mlp.down_proj.weight", "input_layernorm.weight",
                                     "post_attention_layernorm.weight")}
    biased = all(f"model.layers.{i}.self_attn.{x}_proj.bias" in state for i in range(layers) for x in "qkv")
    extra = set(state) - expected - {"lm_head.weight"} - {
        f"model.layers.{i}.self_attn.{x}_proj.bias" for i in range(layers) for x in "qkv" if biased}
    if expected - set(state) or extra:
        raise ConfigError(f"TransformersAdapter: the model's weights are not those of a llama-family decoder "
                          f"(missing {sorted(expected - set(state))[:3]}, unexpected {sorted(extra)[:3]}); run it "
                          "with LlamaCppAdapter (pip install -e '.[llama]')")
    initializers: list[Any] = []
    nodes: list[Any] = []
    with open(out / WEIGHTS, "wb") as data:
        def weight(name: str, array: Any) -> str:
            array = np.ascontiguousarray(array, dtype=np.float32)
            data.write(b"\0" * (-data.tell() % ALIGN))
            offset = data.tell()
            data.write(array.tobytes())
            tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(array.shape),
                                 data_location=TensorProto.EXTERNAL)
            for key, value in (("location", WEIGHTS), ("offset", str(offset)), ("length", str(array.nbytes))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            initializers.append(tensor)
            return name

        def const(name: str, value: Any) -> str:
            initializers.append(numpy_helper.from_array(np.asarray(value), name))
            return name

        count = [0]

        def node(op: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> Any:
            count[0] += 1
            names = [f"{op}_{count[0]}_{j}" for j in range(outputs)]
            nodes.append(helper.make_node(op, inputs, names, **attrs))
            return names[0] if outputs == 1 else names

        const("eps", np.float32(arch["eps"]))
        const("scale", np.float32(1.0 / np.sqrt(dim)))
        const("shape_q", np.array([1, -1, heads, dim], np.int64))
        const("shape_kv", np.array([1, -1, kv, dim], np.int64))
        const("shape_groups", np.array([1, kv, -1, dim], np.int64))
        const("shape_heads", np.array([1, heads, -1, dim], np.int64))
        const("shape_hidden", np.array([1, -1, heads * dim], np.int64))
        const("shape_last", np.array([1, hidden], np.int64))
        const("split_qkv", np.array([heads * dim, kv * dim, kv * dim], np.int64))
        const("split_ff", np.array([ff, ff], np.int64))
        const("split_half", np.array([dim // 2, dim - dim // 2], np.int64))
        const("last_start", np.array([-1], np.int64))
        const("last_end", np.array([np.iinfo(np.int64).max], np.int64))
        const("last_axis", np.array([1], np.int64))

        def rms(x: str, scale: str) -> str:
            mean = node("ReduceMean", [node("Mul", [x, x])], axes=[-1], keepdims=1)
            return node("Mul", [node("Div", [x, node("Sqrt", [node("Add", [mean, "eps"])])]), scale])

        def rotary(x: str) -> str:
            first, second = node("Split", [x, "split_half"], 2, axis=-1)
            turned = node("Concat", [node("Neg", [second]), first], axis=-1)
            return node("Add", [node("Mul", [x, "cos"]), node("Mul", [turned, "sin"])])

        def heads_first(x: str, shape: str) -> str:
            return node("Transpose", [node("Reshape", [x, shape])], perm=[0, 2, 1, 3])

        embed = weight("embed", state["model.embed_tokens.weight"])
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"]),
                  helper.make_tensor_value_info("cos", TensorProto.FLOAT, ["T", dim]),
                  helper.make_tensor_value_info("sin", TensorProto.FLOAT, ["T", dim]),
                  helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["GT", "L"])]
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, arch["vocab"]])]
        h = node("Gather", [embed, "input_ids"], axis=0)
        for i in range(layers):
            p = f"model.layers.{i}."
            qkv = np.concatenate([state[p + f"self_attn.{x}_proj.weight"] for x in "qkv"], 0).T
            projected = node("MatMul", [rms(h, weight(f"l{i}.norm1", state[p + "input_layernorm.weight"])),
                                        weight(f"l{i}.qkv", qkv)])
            if biased:
                bias = np.concatenate([state[p + f"self_attn.{x}_proj.bias"] for x in "qkv"], 0)
                projected = node("Add", [projected, weight(f"l{i}.qkv_bias", bias)])
            q, k, v = node("Split", [projected, "split_qkv"], 3, axis=-1)
            q = node("Mul", [rotary(heads_first(q, "shape_q")), "scale"])
            k = rotary(heads_first(k, "shape_kv"))
            v = heads_first(v, "shape_kv")
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(f"past_{kind}_{i}", TensorProto.FLOAT, [1, kv, "P", dim]))
                outputs.append(helper.make_tensor_value_info(f"present_{kind}_{i}", TensorProto.FLOAT,
                                                             [1, kv, "L", dim]))
            nodes.append(helper.make_node("Concat", [f"past_key_{i}", k], [f"present_key_{i}"], axis=2))
            nodes.append(helper.make_node("Concat", [f"past_value_{i}", v], [f"present_value_{i}"], axis=2))
            # grouped-query attention: the query heads sharing a kv head are stacked along the positions
            grouped = node("Reshape", [q, "shape_groups"])
            scores = node("MatMul", [grouped, node("Transpose", [f"present_key_{i}"], perm=[0, 1, 3, 2])])
            probs = node("Softmax", [node("Add", [scores, "mask"])], axis=-1)
            attended = node("MatMul", [probs, f"present_value_{i}"])
            merged = node("Reshape", [heads_first(attended, "shape_heads"), "shape_hidden"])
            h = node("Add", [h, node("MatMul", [merged, weight(f"l{i}.o", state[p + "self_attn.o_proj.weight"].T)])])
            gate_up = np.concatenate([state[p + "mlp.gate_proj.weight"], state[p + "mlp.up_proj.weight"]], 0).T
            gate, up = node("Split", [node("MatMul", [rms(h, weight(f"l{i}.norm2",
                                                                     state[p + "post_attention_layernorm.weight"])),
                                                      weight(f"l{i}.gate_up", gate_up)]), "split_ff"], 2, axis=-1)
            activated = node("Mul", [node("Mul", [gate, node("Sigmoid", [gate])]), up])
            h = node("Add", [h, node("MatMul", [activated, weight(f"l{i}.down", state[p + "mlp.down_proj.weight"].T)])])
        last = node("Slice", [h, "last_start", "last_end", "last_axis"])
        final = node("Reshape", [rms(last, weight("norm", state["model.norm.weight"])), "shape_last"])
        head = embed if arch["tied"] else weight("lm_head", state["lm_head.weight"])
        nodes.append(helper.make_node("Gemm", [final, head], ["logits"], transB=1))
    graph = helper.make_graph(nodes, "llm_connect_decoder", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="llm_connect")
    model.ir_version = 8
    onnx.save(model, str(out / GRAPH))


# -- running a converted model ----------------------------------------------------------------------------


class OnnxLlama:
    """A converted model loaded from its cache entry: the ONNX decoder on onnxruntime, its tokenizer and chat
    template. Not thread-safe (the adapter holds a lock around it).

    Parameters
    ----------
    entry
        The entry's directory.
    manifest
        Its manifest (``config`` holds what :func:`convert` returned).
    threads
        onnxruntime's intra-op threads (the cores this process may use).
    """

    def __init__(self, entry: Path, manifest: dict[str, Any], *, threads: int) -> None:
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer

        config = manifest["config"]
        self.config = config
        self.entry = entry
        self.eos = frozenset(int(t) for t in config["eos"])
        self.vocab = int(config["vocab"])
        self._groups = config["heads"] // config["kv_heads"]
        dim = int(config["head_dim"])
        self._inv_freq = 1.0 / (float(config["rope_theta"]) ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
        self._empty = np.zeros((1, config["kv_heads"], 0, dim), dtype=np.float32)
        self._past_names = [f"past_{kind}_{i}" for i in range(config["layers"]) for kind in ("key", "value")]
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, int(threads))
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.log_severity_level = 3
        # threads sleep between calls rather than spin (a spinning pool is many times slower on a busy machine)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # The weights are mapped from the cache; the matrices of the layers are then packed into the GEMM
        # kernels' layout (half a second, anonymous memory of their size), which makes a judgment about a third
        # cheaper (MatMul is four fifths of a forward pass). The embedding table stays mapped.
        self.session = ort.InferenceSession(str(entry / GRAPH), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(entry / TOKENIZER))
        self._template = _compile_template(config["chat_template"])
        self._template_tokens = {k: v for k, v in config.get("template_tokens", {}).items() if isinstance(v, str)}
        self._clean_up = bool(config.get("clean_up_spaces"))

    def chat_tokens(self, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> list[int]:
        """The tokens of ``messages`` in the model's chat template, as transformers' ``apply_chat_template``
        gives them (rendered with the same jinja2 environment, tokenized without added special tokens)."""
        return self.encode(self.chat_text(messages, add_generation_prompt=add_generation_prompt))

    def chat_text(self, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> str:
        """``messages`` rendered with the model's chat template (the text :meth:`chat_tokens` tokenizes)."""
        return str(self._template.render(messages=messages, tools=None, documents=None,
                                         add_generation_prompt=add_generation_prompt, **self._template_tokens))

    def encode(self, text: str) -> list[int]:
        """The tokens of ``text`` (special tokens written in it included, none added)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode_with_ends(self, text: str) -> tuple[list[int], list[int]]:
        """The tokens of ``text``, as :meth:`encode`, and where each one ends in it (characters)."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        return list(encoding.ids), [int(end) for _, end in encoding.offsets]

    def decode(self, tokens: list[int], *, skip_special_tokens: bool = False) -> str:
        """The text of ``tokens``, as transformers' ``decode`` gives it."""
        text = str(self.tokenizer.decode([int(t) for t in tokens], skip_special_tokens=skip_special_tokens))
        return _clean_up_spaces(text) if self._clean_up else text

    def forward(self, tokens: list[int], past: tuple[Any, ...] | None) -> tuple[Any, tuple[Any, ...]]:
        """``(the last position's logits as float64, the KV cache after them)``: decode ``tokens`` after ``past``
        (the KV cache of the tokens before, from an earlier call; ``None``: none)."""
        import numpy as np

        count = len(tokens)
        before = 0 if past is None else int(past[0].shape[2])
        angles = np.arange(before, before + count, dtype=np.float64)[:, None] * self._inv_freq[None, :]
        angles = np.concatenate([angles, angles], axis=-1)
        seen = np.arange(before + count)[None, :] <= before + np.arange(count)[:, None]
        mask = np.where(seen, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)
        feed: dict[str, Any] = {"input_ids": np.asarray([tokens], dtype=np.int64),
                                "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32),
                                "mask": np.tile(mask, (self._groups, 1))}
        for j, name in enumerate(self._past_names):
            feed[name] = self._empty if past is None else past[j]
        logits, *present = self.session.run(None, feed)
        return logits[0].astype(np.float64), tuple(present)


def _clean_up_spaces(text: str) -> str:
    """transformers' ``clean_up_tokenization`` (for the tokenizers that ask for it)."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


def _compile_template(template: str) -> Any:
    """A chat template compiled as transformers compiles it: a sandboxed jinja2 environment that trims blocks,
    with loop controls, ``raise_exception``, ``strftime_now`` and its ``tojson``."""
    import json
    from datetime import datetime

    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def load_model(source: Path, *, threads: int) -> OnnxLlama:
    """The converted model of the GGUF file ``source``: from the cache, converted first when it is not there
    (said on stderr, with the time it took).

    Raises
    ------
    MissingDependencyError
        When onnxruntime, tokenizers or jinja2 is not installed (or a converter's package, to convert).
    ConfigError
        When the model cannot be converted (no chat template, not of the llama family), or the cache
        directory cannot be written.
    """
    missing = next((package for module, package in RUNTIME if not module_installed(module)), None)
    if missing is not None:
        raise MissingDependencyError(missing, "local", "TransformersAdapter (the embedded LLM on onnxruntime)")
    from ._model_cache import open_entry

    entry, manifest = open_entry(source, writer_versions(), lambda out: convert(source, out), what="for onnxruntime")
    return OnnxLlama(entry, manifest, threads=threads)
