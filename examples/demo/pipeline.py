"""The bundled example pipeline: BM25 over the Quillstack handbook and an extractive answerer.

Standard library only, fully deterministic. Two variants share all the code and differ only
in their settings:

* ``make_baseline()``: one chunk per handbook section, exact-word matching.
* ``make_candidate()``: two-unit windows (a unit is a sentence or a table line), plus a light
  suffix stemmer and a small synonym table. Finer chunks and looser matching find more of the
  right passages, but a window holding table rows without the table's header row loses what
  each column means, so questions answered from a table cell get worse.

The answerer reads only the retrieved chunk texts, as a real one would: prose is split into
sentences; a Markdown table whose header row is in the same chunk is read cell by cell (the
cell of row R under column C is matched as the phrase "R C"); table rows without their header
are read as plain sentences. It answers with the best-matching sentence or cell, cites the
chunk it came from, and declines when retrieval or the best match covers too little of the
question. Sentences that look like instructions to an assistant are dropped before matching
by a deliberately simple pattern, so some injected text still gets through.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"

REFUSAL = "I don't know based on the documentation."

_STOPWORD_LIST = """a an and are as at be by can do does for from how i if in is it its my of on or our so
    that the their then there these this to was we what when where which who why will with you
    your before only than into per after about any every each much many long should
    would could get set use used using"""
STOPWORDS = frozenset(_STOPWORD_LIST.split())

# Candidate only: words mapped to one canonical form on both the index and the query side.
SYNONYMS = {
    "cost": "price",
    "costs": "price",
    "pricing": "price",
    "charge": "price",
    "expire": "expires",
    "expiry": "expires",
    "remove": "delete",
    "erase": "delete",
    "backup": "snapshot",
    "backups": "snapshot",
    "recover": "restore",
    "maximum": "max",
    "limit": "max",
    "capped": "max",
    "ceiling": "max",
    "largest": "max",
    "biggest": "max",
    "phone": "mobile",
    "phones": "mobile",
    "iphone": "ios",
    "ram": "memory",
    "disk": "storage",
    "space": "storage",
    "login": "sign",
    "logins": "sign",
    # "two-factor" is indexed as the words "two" and "factor"
    "mfa": "two",
    "2fa": "two",
    "kept": "keep",
    "retain": "keep",
    "retained": "keep",
    "stay": "keep",
    "stays": "keep",
    "lasts": "keep",
    "hold": "keep",
    "holds": "keep",
    "store": "keep",
    "stores": "keep",
    "simultaneously": "once",
    "concurrently": "once",
    "vulnerability": "vulnerabilities",
    "bug": "vulnerabilities",
    "encrypt": "encrypted",
    "encryption": "encrypted",
}

TOKEN = re.compile(r"[a-z0-9]+(?:[._'][a-z0-9]+)*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9<\[(])")
TABLE_SEPARATOR = re.compile(r"^\|\s*:?-{3,}")
# Naive injection filter: catches the obvious imperative phrasings only.
INJECTION_PATTERN = re.compile(
    r"ignore (?:all )?(?:previous|prior) instructions|disregard|\bsystem:|you are now|"
    r"respond with|reply (?:only )?with",
    re.IGNORECASE,
)


def light_stem(word: str) -> str:
    """A light stemmer: one of -ies→-y, -ing, -ed or plural -s (not -ss, -us), then a final -e.

    Far cruder than Porter's; enough to join "copies"/"copy", "rotate"/"rotated"/"rotating",
    "attachments"/"attachment". Short words are left alone.
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us")):
        word = word[:-1]
    # a final silent e, so "rotate", "rotated" and "rotating" meet
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


@dataclass(frozen=True)
class Analyzer:
    """Text → index terms: lowercase words minus stopwords, optionally synonym-mapped and stemmed."""

    stem: bool = False
    synonyms: bool = False

    def terms(self, text: str) -> list[str]:
        out = []
        for word in TOKEN.findall(text.lower()):
            if word in STOPWORDS:
                continue
            if self.synonyms:
                word = SYNONYMS.get(word, word)
            if self.stem:
                word = light_stem(word)
            out.append(word)
        return out


class BM25:
    """Okapi BM25 over a fixed list of term lists.

    score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))      (never negative)

    Query terms count once each (a repeated word does not weigh more). A term absent from the
    collection has df 0, hence the largest idf: it scores nothing but still counts in
    :meth:`idf_mass`, which is what makes questions about unknown things score low relative
    to their mass. Ties are broken by position in the collection, so rankings are total and
    deterministic.
    """

    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(d) for d in docs]
        self.lengths = [len(d) for d in docs]
        self.avgdl = (sum(self.lengths) / len(docs)) if docs else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        self.n = len(docs)
        self.df = df

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def idf_mass(self, query: list[str]) -> float:
        """Σ idf over the distinct query terms: about the score of a typical chunk matching all of them once."""
        return sum(self.idf(t) for t in dict.fromkeys(query))

    def score(self, query: list[str], i: int) -> float:
        tf, norm = self.tfs[i], self.k1 * (1 - self.b + self.b * self.lengths[i] / (self.avgdl or 1.0))
        total = 0.0
        for t in dict.fromkeys(query):
            f = tf.get(t, 0)
            if f:
                total += self.idf(t) * f * (self.k1 + 1) / (f + norm)
        return total

    def top(self, query: list[str], k: int) -> list[tuple[int, float]]:
        """The k best (index, score) pairs with score > 0, best first, ties by index."""
        scored = [(i, self.score(query, i)) for i in range(self.n)]
        ranked = sorted((p for p in scored if p[1] > 0), key=lambda p: (-p[1], p[0]))
        return ranked[:k]


# ---------------------------------------------------------------- corpus and chunking


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    topic: str
    source: str
    body: str


def read_document(path: Path) -> Document:
    """Parse a handbook page: a ``---`` front matter of ``key: value`` lines, then Markdown."""
    text = path.read_text(encoding="utf-8")
    head, sep, body = text.removeprefix("---\n").partition("\n---\n")
    if not text.startswith("---\n") or not sep:
        raise ValueError(f"{path}: expected a front matter block between '---' lines")
    fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    for key in ("id", "title", "topic"):
        if key not in fields:
            raise ValueError(f"{path}: front matter lacks {key!r}")
    return Document(
        fields["id"], fields["title"], fields["topic"], fields.get("source", "handbook"), body.strip()
    )


def load_documents(corpus_dir: Path = CORPUS_DIR) -> list[Document]:
    """Every ``*.md`` page of the corpus, in file-name order."""
    return [read_document(p) for p in sorted(corpus_dir.glob("*.md"))]


def section_units(section: str) -> list[str]:
    """A section's units in order: prose sentences and table lines (header + separator as one)."""
    units: list[str] = []
    lines = section.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            if i + 1 < len(lines) and TABLE_SEPARATOR.match(lines[i + 1].strip()):
                units.append(line + "\n" + lines[i + 1].strip())
                i += 2
                continue
            units.append(line)
        elif line:
            units.extend(s.strip() for s in SENTENCE_END.split(line) if s.strip())
        i += 1
    return units


def split_sections(body: str) -> list[str]:
    """Body text split at ``## `` headings; the heading lines themselves are not chunk text."""
    sections = re.split(r"^## .*$", body, flags=re.MULTILINE)
    return [s.strip() for s in sections if s.strip()]


def join_units(units: list[str]) -> str:
    """Units back into text: sentences joined by a space, table lines kept on lines of their own."""
    text = ""
    for previous, unit in zip([None, *units], units, strict=False):
        if previous is None:
            text = unit
        else:
            on_own_line = unit.startswith("|") or previous.startswith("|")
            text += ("\n" if on_own_line else " ") + unit
    return text


def chunk_document(doc: Document, window: int | None) -> list[dict[str, Any]]:
    """Chunks ``DOCID#N``: one per section (window None) or per ``window`` consecutive units."""
    pieces: list[str] = []
    for section in split_sections(doc.body):
        units = section_units(section)
        if window is None:
            pieces.append(join_units(units))
        else:
            pieces.extend(join_units(units[i : i + window]) for i in range(0, len(units), window))
    return [
        {
            "id": f"{doc.id}#{n}",
            "text": text,
            "metadata": {"document_id": doc.id, "title": doc.title, "topic": doc.topic, "source": doc.source},
        }
        for n, text in enumerate(pieces)
    ]


# ---------------------------------------------------------------- answering


@dataclass(frozen=True)
class Passage:
    """A candidate answer read from a chunk: ``text`` is returned, ``match_text`` is matched."""

    text: str
    match_text: str
    chunk_rank: int
    position: int


def row_cells(line: str) -> list[str]:
    """The cells of one Markdown table line: ``| a | b |`` → ``["a", "b"]``."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_passages(text: str, chunk_rank: int) -> list[Passage]:
    """Sentences, table cells (when the header is present) and header-less table rows of a chunk."""
    passages: list[Passage] = []
    lines = text.splitlines()
    header: list[str] | None = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        if TABLE_SEPARATOR.match(line):
            continue
        if line.startswith("|"):
            cells = row_cells(line)
            if i + 1 < len(lines) and TABLE_SEPARATOR.match(lines[i + 1].strip()):
                header = cells
                continue
            if header is not None and len(header) == len(cells):
                for col in range(1, len(cells)):
                    phrase = f"{cells[0]} {header[col]}"
                    passages.append(Passage(cells[col], phrase, chunk_rank, len(passages)))
            else:
                row = " | ".join(cells)
                passages.append(Passage(row, row, chunk_rank, len(passages)))
            continue
        header = None
        for sentence in SENTENCE_END.split(line):
            if sentence.strip():
                passages.append(Passage(sentence.strip(), sentence.strip(), chunk_rank, len(passages)))
    return passages


@dataclass(frozen=True)
class Settings:
    name: str
    # None: one chunk per section; N: windows of N units
    window: int | None
    stem: bool
    synonyms: bool
    # decline when the top BM25 score is below this fraction of the question's idf mass
    min_retrieval_coverage: float = 0.35
    # decline when the best passage matches less than this fraction of the idf mass
    min_answer_coverage: float = 0.3
    # chunks the answerer reads
    context_chunks: int = 3


class HandbookPipeline:
    """``retrieve(question, k)`` and ``answer(question)`` over the Quillstack handbook."""

    def __init__(self, settings: Settings, corpus_dir: Path = CORPUS_DIR) -> None:
        self.settings = settings
        self.analyzer = Analyzer(stem=settings.stem, synonyms=settings.synonyms)
        self.chunks = [c for doc in load_documents(corpus_dir) for c in chunk_document(doc, settings.window)]
        self.index = BM25([self.analyzer.terms(c["text"]) for c in self.chunks])

    def _ranked(self, question: str, k: int) -> tuple[list[dict[str, Any]], float]:
        query = self.analyzer.terms(question)
        hits = self.index.top(query, k)
        # fresh dicts: callers may keep or change what they get without touching the index
        chunks = [
            {**self.chunks[i], "metadata": dict(self.chunks[i]["metadata"]), "score": round(s, 6)}
            for i, s in hits
        ]
        return chunks, self.index.idf_mass(query)

    def retrieve(self, question: str, k: int) -> list[dict[str, Any]]:
        return self._ranked(question, k)[0]

    def answer(self, question: str) -> dict[str, Any]:
        chunks, mass = self._ranked(question, 5)
        declined = {"text": REFUSAL, "citations": [], "retrieved_chunks": chunks}
        if not chunks or mass <= 0 or chunks[0]["score"] / mass < self.settings.min_retrieval_coverage:
            return declined
        # distinct terms in question order: float sums in a fixed order, whatever the hash seed
        query = list(dict.fromkeys(self.analyzer.terms(question)))
        best: tuple[float, int, int] | None = None
        best_passage: Passage | None = None
        for rank, chunk in enumerate(chunks[: self.settings.context_chunks]):
            for passage in read_passages(chunk["text"], rank):
                if INJECTION_PATTERN.search(passage.text):
                    continue
                words = set(self.analyzer.terms(passage.match_text))
                overlap = sum(self.index.idf(t) for t in query if t in words)
                # Prefer better-ranked chunks a little: a passage from the top chunk wins a near-tie.
                key = (overlap * (1.0 - 0.05 * rank), -rank, -passage.position)
                if best is None or key > best:
                    best, best_passage = key, passage
        if best_passage is None or best is None or best[0] / mass < self.settings.min_answer_coverage:
            return declined
        cited = chunks[best_passage.chunk_rank]["id"]
        return {"text": best_passage.text, "citations": [cited], "retrieved_chunks": chunks}


BASELINE = Settings(name="baseline", window=None, stem=False, synonyms=False)
CANDIDATE = Settings(name="candidate", window=2, stem=True, synonyms=True)


def make_baseline() -> HandbookPipeline:
    """Section chunks, exact-word BM25."""
    return HandbookPipeline(BASELINE)


def make_candidate() -> HandbookPipeline:
    """Two-unit windows, light stemming and synonyms: better recall, but tables lose their headers."""
    return HandbookPipeline(CANDIDATE)
