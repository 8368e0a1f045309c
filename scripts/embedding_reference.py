"""Writes tests/data/embeddings/minilm.npz: SentenceTransformer.encode's vectors of the texts that
tests/test_embeddings.py embeds, on the default embedder, to hold rolebound's own mean pooling to them
bit for bit without importing sentence-transformers in the tests (seconds of CPU in every run).
Rerun after changing the locked torch, transformers or sentence-transformers:

    .venv/bin/python scripts/embedding_reference.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    from rolebound.scoring.embeddings import default_path
    from test_embeddings import BATCH, TEXTS

    torch.set_num_threads(1)            # float sums depend on the thread count; the test uses 1 too
    vecs = SentenceTransformer(default_path(), device="cpu").encode(
        TEXTS, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True)
    versions = f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, " \
               f"transformers {transformers.__version__}"
    out = ROOT / "tests" / "data" / "embeddings" / "minilm.npz"
    np.savez_compressed(out, texts=np.array(TEXTS), vectors=vecs, versions=np.array(versions))
    print(f"{out}: {vecs.shape[0]} vectors ({versions})")


if __name__ == "__main__":
    main()
