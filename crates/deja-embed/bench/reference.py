#!/usr/bin/env python3
"""Python reference for examples/embed_bench.rs: the same model.onnx and tokenizer through
onnxruntime + tokenizers, mean pooling, L2 normalisation, same texts, same figures.

Needs `onnxruntime==1.24.4 tokenizers numpy` (bench/run.sh sets up .deja/venv-bench).
Model folder: $DEJA__EMBEDDING__MODEL_DIR, else <repo>/.deja/models/all-MiniLM-L6-v2.
Intra-op threads: $BENCH_THREADS (0 = one per core), default 1 as deja's
`embedding.intra_threads`, which embed_bench runs with; bench/run.sh sets it from that setting.
"""
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
MODEL_DIR = Path(
    os.environ.get("DEJA__EMBEDDING__MODEL_DIR")
    or HERE.parent.parent.parent / ".deja/models/all-MiniLM-L6-v2"
)
MAX_LENGTH = 256  # embedding.max_length
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
# The same thread count as the Rust side (embedding.intra_threads; 0 = one per core).
THREADS = int(os.environ.get("BENCH_THREADS") or "1") or (os.cpu_count() or 1)


def peak_rss_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    texts = [l for l in (HERE / "incidents.txt").read_text().splitlines() if l.strip()]

    started = time.perf_counter()
    tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_LENGTH)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch
    options = ort.SessionOptions()
    # As deja's embedder: embedding.intra_threads threads for one inference, all graph
    # optimisations.
    options.intra_op_num_threads = THREADS
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(
        str(MODEL_DIR / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    input_names = {i.name for i in session.get_inputs()}
    load_ms = (time.perf_counter() - started) * 1000

    def embed(batch: list[str]) -> np.ndarray:
        encodings = tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden = session.run(None, feeds)[0]  # last_hidden_state [batch, tokens, dim]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True).clip(1e-12)

    def embed_all(batch_size: int) -> np.ndarray:
        return np.concatenate(
            [embed(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        )

    words = sum(len(t.split()) for t in texts) / len(texts)
    print(
        f"python onnxruntime {ort.__version__}: {len(texts)} texts, {words:.1f} words on average, "
        f"model {MODEL_DIR}, {THREADS} intra-op thread(s), loaded in {load_ms:.0f} ms"
    )
    embed(texts[:8])  # warm-up

    def rate(batch_size: int) -> float:
        runs = []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            embed_all(batch_size)
            runs.append(len(texts) / (time.perf_counter() - t))
        return statistics.median(runs)

    batch1 = rate(1)
    batch64 = rate(64)
    probe = embed(
        [
            "redis evicted keys climbing, payments pods crashloop",
            "redis memory eviction caused payment service crashes",
            "TLS certificate expired on the ingress",
        ]
    )
    peak = peak_rss_mib()
    print(f"batch 1:  {batch1:.1f} texts/s")
    print(f"batch 64: {batch64:.1f} texts/s")
    print(f"peak RSS: {peak:.0f} MiB")
    print(
        f"sanity: cos(similar) = {probe[0] @ probe[1]:.4f}, cos(unrelated) = {probe[0] @ probe[2]:.4f}, "
        f"v0[..4] = {probe[0][:4].tolist()}"
    )
    print(f"RESULT impl=python batch1={batch1:.2f} batch64={batch64:.2f} peak_rss_mib={peak:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
