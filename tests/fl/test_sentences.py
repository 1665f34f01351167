"""The offline sentence splitter is deterministic and handles the usual traps."""

from fl.sentences import split_sentences


def test_splits_on_terminal_punctuation_and_html_breaks() -> None:
    text = 'Mr. Smith came. He said "hi!" Then left?  Yes.<br /><br />New one e.g. this. J. Doe wrote it.'
    assert split_sentences(text) == [
        "Mr. Smith came.", 'He said "hi!"', "Then left?", "Yes.", "New one e.g. this.", "J. Doe wrote it.",
    ]


def test_empty_and_single_sentences() -> None:
    assert split_sentences("   \n ") == []
    assert split_sentences("it 's a charming journey . ") == ["it 's a charming journey ."]
    assert split_sentences("no punctuation at all") == ["no punctuation at all"]


def test_deterministic() -> None:
    text = "One. Two! Three? " * 50
    assert split_sentences(text) == split_sentences(text)
    assert len(split_sentences(text)) == 150
