"""The perturbations of the bias probes change one thing about an answer and keep its correctness."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_connect.grading import normalize_squad
from llm_connect.testing import pad_with_filler, plant_injection, to_markdown

texts = st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=80) | st.sampled_from(
    ["The Washington Redskins are based out of Landover, Maryland. It is near DC!", "washington, d. c.", ""])


@settings(max_examples=150, deadline=None)
@given(texts)
def test_markdown_keeps_every_word(text):
    assert normalize_squad(to_markdown(text)) == normalize_squad(text)


@settings(max_examples=100, deadline=None)
@given(texts, st.integers(0, 5))
def test_padding_keeps_the_answer_and_adds_words(text, seed):
    padded = pad_with_filler(text, seed=seed)
    assert padded.startswith(text)
    assert len(padded.split()) >= max(2 * len(text.split()), len(text.split()) + 20)
    assert padded == pad_with_filler(text, seed=seed)


def test_injection():
    assert plant_injection("Paris").startswith("Paris\n\n") and "quality_score 1.0" in plant_injection("Paris")
    assert plant_injection("", "x") == "x"
