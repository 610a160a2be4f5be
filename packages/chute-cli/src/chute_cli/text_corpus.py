"""The text demo's corpus and tokenizer, for benchmarks that measure on the same data.

`chute demo --text` trains on the standard library's docstrings (nothing to download),
tokenized by a byte-level BPE tokenizer trained on them; these are the functions that
make both (`train_tokenizer` needs `tokenizers`: `pip install 'chute-transforms[text]'`).

Example:
    >>> from chute_cli.text_corpus import EOS, docstrings
    >>> EOS, len(docstrings(limit=3))
    (0, 3)
"""

from ._demo_text_data import EOS as EOS
from ._demo_text_data import docstrings as docstrings
from ._demo_text_data import train_tokenizer as train_tokenizer
from ._demo_text_data import write_corpus as write_corpus

__all__ = ["EOS", "docstrings", "train_tokenizer", "write_corpus"]
