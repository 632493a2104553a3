"""Corpora, tokenizers and token streams for training and evaluating extrap models.

Typical use::

    corpus = load_corpus("stdlib")
    tok = get_tokenizer("bpe:8192", corpus)
    train = token_stream(corpus, tok, "train")
    sampler = BatchSampler(train, batch_size=32, length=512, seed=0)
    x, y = sampler.next()
"""

from extrap.data.cache import cache_root
from extrap.data.corpora import SPLITS, Corpus, list_corpora, load_corpus
from extrap.data.streams import BatchSampler, eval_stream, segment_starts, segments, token_stream
from extrap.data.tokenizers import BPETokenizer, ByteTokenizer, Tokenizer, get_tokenizer, load_tokenizer

__all__ = [
    "SPLITS",
    "BPETokenizer",
    "BatchSampler",
    "ByteTokenizer",
    "Corpus",
    "Tokenizer",
    "cache_root",
    "eval_stream",
    "get_tokenizer",
    "list_corpora",
    "load_corpus",
    "load_tokenizer",
    "segment_starts",
    "segments",
    "token_stream",
]
