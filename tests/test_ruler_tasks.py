"""RULER's 13 tasks (tasks/*.toml, `kind = "ruler"`): each generator puts its answer in the context the
stated number of times, in a prompt of exactly the requested tokens, the same for the same seed; the
scorers are RULER's on hand-written outputs; task files are validated field by field."""

import json
import re
from pathlib import Path

import pytest
import torch

from extrapolate.core.errors import UserError
from extrapolate.data.tokenizers import ByteTokenizer
from extrapolate.tasks.files import load_task
from extrapolate.tasks.kinds import file_kind
from extrapolate.tasks.ruler.haystack import DEPTHS, fit_count
from extrapolate.tasks.ruler.score import cleaned, string_match_all, string_match_part

from .test_passkey import WordTokenizer

RULER_TASKS = [
    "niah_single_1",
    "niah_single_2",
    "niah_single_3",
    "niah_multikey_1",
    "niah_multikey_2",
    "niah_multikey_3",
    "niah_multivalue",
    "niah_multiquery",
    "vt",
    "cwe",
    "fwe",
    "qa_1",
    "qa_2",
]
OFFLINE = [t for t in RULER_TASKS if not t.startswith("qa")]
ESSAY = " ".join(
    f"Line {i} of the book tells of the sea. The king rode home! Was it late? It was." for i in range(4000)
)


def builder_for(task, tokenizer=None, heldout=None):
    tokenizer = tokenizer or WordTokenizer()
    heldout = heldout if heldout is not None else [torch.tensor(tokenizer.encode(ESSAY))]
    return file_kind(task).prompt_builder(task, tokenizer, None, None, heldout)


def squad_file(folder: Path) -> Path:
    paragraphs = []
    for p in range(30):
        qas = [{"question": f"Who built tower {p}?", "answers": [{"text": f"Mason{p}"}], "is_impossible": False}]
        qas.append({"question": f"What is unknowable {p}?", "answers": [], "is_impossible": True})
        paragraphs.append({"context": f"Tower {p} stands by river {p}. It was built by Mason{p} long ago.", "qas": qas})
    data = {"data": [{"title": f"T{a}", "paragraphs": paragraphs[a * 10 : a * 10 + 10]} for a in range(3)]}
    path = folder / "squad.json"
    path.write_text(json.dumps(data))
    return path


def hotpot_file(folder: Path) -> Path:
    rows = []
    for i in range(30):
        context = [
            [f"Town{i}", [f"Town{i} lies north. ", f"Its mayor is Mayor{i}."]],
            [f"Mayor{i}", [f"Mayor{i} was born in Y{i}."]],
        ]
        rows.append({"question": f"Where was the mayor of Town{i} born?", "answer": f"Y{i}", "context": context})
    path = folder / "hotpot.json"
    path.write_text(json.dumps(rows))
    return path


def local_task(name: str, folder: Path):
    """qa_1/qa_2 as a user runs them: a copy of the task file naming a local dataset file."""
    data = (squad_file if name == "qa_1" else hotpot_file)(folder)
    text = load_task_text(name).replace('data = ""', f'data = "{data.name}"')
    path = folder / f"{name}.toml"
    path.write_text(text)
    return load_task(str(path))


def load_task_text(name: str) -> str:
    from extrapolate.tasks.files import task_file

    return task_file(name).read_text()


def test_the_thirteen_tasks_are_listed_by_their_ruler_names():
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    out = CliRunner().invoke(app, ["tasks", "--json"]).output
    listed = {row["task"]: row for row in json.loads(out)}
    for name in RULER_TASKS:
        assert listed[name]["kind"] == "ruler"
    # one file validated, as JSON too: the identity the listing gives it
    from extrapolate.tasks.files import TASKS_DIR

    path = str(TASKS_DIR / "ruler" / "vt.toml")
    validated = json.loads(CliRunner().invoke(app, ["tasks", "--validate", path, "--json"]).output)
    assert validated == {"file": path, "task": "vt", "kind": "ruler", "identity": listed["vt"]["identity"]}


@pytest.mark.parametrize("name", RULER_TASKS)
@pytest.mark.parametrize("length", [1024, 2048])
def test_prompts_are_exact_in_tokens_and_seeded(name, length, tmp_path):
    task = local_task(name, tmp_path) if name.startswith("qa") else load_task(name)
    builder = builder_for(task)
    first, again, other = builder.prompt(length, 0), builder.prompt(length, 0), builder.prompt(length, 1)
    assert len(first.ids) == length - task.tokens_to_generate
    assert first == again
    assert first.ids != other.ids
    assert first.outputs and all(isinstance(o, str) and o for o in first.outputs)


def main_context(builder, prompt) -> str:
    """The decoded prompt after its solved examples: from the last time the template's opening appears."""
    text = builder.tokenizer.decode(prompt.ids)
    opening = builder.task.template.split("{")[0][:40]
    return text[text.rfind(opening) :] if opening and opening in text else text


@pytest.mark.parametrize("name", [t for t in OFFLINE if t.startswith("niah")])
def test_every_needle_value_is_in_the_context_once(name):
    task = load_task(name)
    builder = builder_for(task)
    args = dict(task.args)
    for index in range(3):
        prompt = builder.prompt(2048, index)
        text = main_context(builder, prompt)
        assert len(prompt.outputs) == args["num_needle_v"] * args["num_needle_q"]
        for value in prompt.outputs:
            assert text.count(value) == 1, (value, text.count(value))
        needles = re.findall(r"One of the special magic \w+ for ", text)
        distractors = args["type_haystack"] == "needle"
        assert (len(needles) > 10) if distractors else len(needles) == args["num_needle_k"] * args["num_needle_v"]


def test_a_single_needle_question_is_worded_in_the_singular():
    builder = builder_for(load_task("niah_single_1"))
    text = builder.tokenizer.decode(builder.prompt(1024, 0).ids)
    assert text.startswith("A special magic number is hidden within the following text.")
    assert text.endswith("The special magic number for " + text.split(" for ")[-1])
    assert " is" in text[-40:] and "numbers" not in text[-120:]


def test_essay_needles_sit_at_sentence_boundaries():
    task = load_task("niah_multivalue")
    builder = builder_for(task)
    prompt = builder.prompt(2048, 0)
    text = builder.tokenizer.decode(prompt.ids)
    for value in prompt.outputs:
        before = text[: text.index(f"is: {value}.")]
        preceding = before[: before.rindex(" One of the special magic")]
        assert preceding.rstrip().endswith((".", "!", "?")), preceding[-30:]
    assert DEPTHS[0] == 0 and DEPTHS[-1] == 100 and len(set(DEPTHS)) == 40


def test_variable_tracking_hides_each_hop_once_after_one_solved_example():
    task = load_task("vt")
    builder = builder_for(task)
    prompt = builder.prompt(2048, 0)
    text = main_context(builder, prompt)
    names = prompt.outputs
    assert len(names) == dict(task.args)["num_hops"] + 1 and all(re.fullmatch(r"[A-Z]{5}", n) for n in names)
    value = re.search(rf"VAR {names[0]} = (\d+)", text).group(1)
    assert text.count(f"VAR {names[0]} = {value}") == 1
    for a, b in zip(names, names[1:]):
        assert text.count(f"VAR {b} = VAR {a}") == 1
    assert f"assigned the value {value}" in text
    whole = builder.tokenizer.decode(prompt.ids)
    example = whole[: whole.rfind("Memorize and track")]
    assert re.search(r"they are: +([A-Z]{3} ){4}[A-Z]{3}\n", example), "the solved example comes first with its answer"


@pytest.mark.parametrize("name, line", [("vt", r"VAR [A-Z]{5} = "), ("cwe", r"\d+\. \w"), ("niah_single_1", r"One of")])
def test_the_noise_top_up_never_runs_into_the_contexts_lines(name, line):
    """The tokens that top a context up to its exact length end with a newline: every line of the context
    still starts a line (RULER's contexts hold no such fragment)."""
    builder = builder_for(load_task(name))
    for index in range(6):
        prompt = builder.prompt(1024, index)
        text = main_context(builder, prompt)
        for match in re.finditer(line, text):
            if name != "cwe" or text[match.start() : match.start() + 3] == "1. ":
                assert text[match.start() - 1] in "\n ", text[match.start() - 30 : match.end()]
    assert builder.pad(1) == builder.newline and builder.pad(0) == []
    assert builder.tokenizer.decode(builder.pad(7)).endswith("\n")


def test_essay_needles_are_single_spaced():
    builder = builder_for(load_task("niah_single_2"))
    for index in range(4):
        text = builder.tokenizer.decode(builder.prompt(2048, index).ids)
        at = text.index("One of the special magic")
        assert "  " not in text[at - 40 : at + 120], text[at - 40 : at + 120]


@pytest.mark.parametrize("length, repeats", [(2048, (6, 1)), (4096, (30, 3))])
def test_common_words_appear_their_stated_number_of_times(length, repeats):
    task = load_task("cwe")
    builder = builder_for(task)
    prompt = builder.prompt(length, 0)
    text = main_context(builder, prompt)
    listed = re.findall(r"\d+\. ([a-z][\w'-]*)", text.split("Question:")[0])
    counts = {w: listed.count(w) for w in set(listed)}
    assert len(prompt.outputs) == 10
    assert all(counts[w] == repeats[0] for w in prompt.outputs)
    assert set(counts.values()) == set(repeats)
    assert sum(c == repeats[0] for c in counts.values()) == 10


def test_frequent_words_are_the_three_most_frequent_after_the_noise_word():
    task = load_task("fwe")
    builder = builder_for(task)
    prompt = builder.prompt(2048, 0)
    text = main_context(builder, prompt).split("Question:")[0]
    words = [w for w in text.split() if re.fullmatch(r"[a-z]{6}|\.\.\.", w)]
    ranked = sorted(set(words), key=words.count, reverse=True)
    assert ranked[0] == "..."
    assert list(prompt.outputs) == ranked[1:4]
    assert words.count(ranked[1]) > words.count(ranked[2]) > words.count(ranked[3]) > words.count(ranked[4])


@pytest.mark.parametrize("name", ["qa_1", "qa_2"])
def test_qa_puts_the_questions_own_documents_among_distractors(name, tmp_path):
    task = local_task(name, tmp_path)
    builder = builder_for(task)
    prompt = builder.prompt(1024, 0)
    text = builder.tokenizer.decode(prompt.ids)
    question = re.search(r"Question: (.*)$", text.split(" Answer:")[0]).group(1)
    answer = prompt.outputs[0]
    assert answer in text
    assert text.count("Document ") > 5
    assert "unknowable" not in question


@pytest.mark.parametrize("name", ["qa_1", "qa_2"])
def test_qa_asks_the_files_questions_in_order_the_same_at_every_length(name, tmp_path):
    builder = builder_for(local_task(name, tmp_path))
    questions = builder.generator.questions
    for index in (0, 1, 7):
        short, long = builder.prompt(1024, index), builder.prompt(2048, index)
        assert short.outputs == long.outputs == tuple(questions[index].answers)
        assert builder.tokenizer.decode(long.ids).count(questions[index].query) == 1
    wrapped = builder.prompt(1024, len(questions))
    assert wrapped.outputs == tuple(questions[0].answers)  # past the last question, the first again


def test_qa_identity_changes_with_its_data_files_contents(tmp_path):
    """Same identity, same prompts: a resumed cell must not mix prompts of two versions of the user's file."""
    before = local_task("qa_1", tmp_path)
    data = tmp_path / "squad.json"
    data.write_text(data.read_text().replace("Mason1", "Builder1"))
    after = load_task(str(tmp_path / "qa_1.toml"))
    assert before.identity != after.identity and before.data_sha256 and after.data_sha256
    assert load_task("vt").identity == "vt-v3-ruler-40bdcf3a"  # tasks without a data file: no digest field


def test_qa_without_a_data_file_says_how_to_give_one():
    with pytest.raises(UserError, match="args.data"):
        builder_for(load_task("qa_1"))


def test_byte_and_word_tokenizers_both_give_exact_lengths():
    for tokenizer in (ByteTokenizer(), WordTokenizer()):
        task = load_task("niah_single_2")
        builder = builder_for(task, tokenizer, [torch.tensor(tokenizer.encode(ESSAY))])
        assert len(builder.prompt(3000, 2).ids) == 3000 - task.tokens_to_generate


def test_training_rows_end_with_the_answer_under_the_mask():
    task = load_task("vt")
    builder = builder_for(task)
    tokens, mask = builder.training_row(torch.Generator().manual_seed(0), 2048)
    assert tokens.shape == (2049,) and mask.shape == (2048,)
    answered = builder.tokenizer.decode(tokens[1:][mask.bool()].tolist())
    assert re.fullmatch(r"([A-Z]{5} ){4}[A-Z]{5}", answered.strip())


def test_string_match_all_is_the_share_of_references_found():
    assert string_match_all("The numbers are 1234567 and 7654321.", ["1234567", "7654321"]) == 1.0
    assert string_match_all("only 1234567", ["1234567", "7654321", "1111111"]) == pytest.approx(1 / 3)
    assert string_match_all("UUID: ABC-def", ["abc-DEF"]) == 1.0  # case-insensitive
    assert string_match_all("nothing", ["x1"]) == 0.0


def test_string_match_part_is_whether_any_reference_is_found():
    assert string_match_part("It was Mason7.", ["Mason7", "a mason"]) == 1.0
    assert string_match_part("It was Mason7.", ["Mason8", "a mason"]) == 0.0


def test_predictions_are_cleaned_as_ruler_cleans_them():
    assert cleaned("  \tfoo\x00bar\n ") == "foo\nbar"


def test_fit_count_finds_the_largest_count_that_fits():
    count, tokens = fit_count(lambda n: [0] * (3 * n + 5), 100)
    assert count == 31 and len(tokens) == 98
    assert fit_count(lambda n: [0] * n, 50, 0, 20) == (20, [0] * 20)


@pytest.mark.parametrize(
    "change, message",
    [
        (('task = "niah"', 'task = "needle"'), "field 'task' must be one of"),
        (('metric = "string_match_all"', 'metric = "exact"'), "field 'metric'"),
        (("threshold = 0.856", "threshold = 85.6"), "RULER's 85.6 is 0.856"),
        (('type_haystack = "noise"', 'type_haystack = "sand"'), "argument 'type_haystack'"),
        (('type_haystack = "noise"', 'haystack = "noise"'), "takes no argument 'haystack'"),
        (("{context}", "{contents}"), "placeholder {contents}"),
        (("{context}", "{context:.5}"), "placeholder {context:.5}"),  # a spec would cut the haystack at prompts
        (("samples = 20", "samples = 0"), "field 'samples'"),
        (("samples = 20", f"samples = {2**63}"), "field 'samples'"),  # past TOML's and torch's int64
        (("samples = 20", "samples = 20\nnum_needle_k = 4"), "'num_needle_k' is an argument: give it under [args]"),
        (("samples = 20", "samples = 20\nneedles = 4"), "unknown field 'needles'"),
    ],
)
def test_task_files_are_validated_field_by_field(change, message, tmp_path):
    text = load_task_text("niah_single_1")
    assert change[0] in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(change[0], change[1], 1))
    with pytest.raises(UserError, match=re.escape(message)):
        load_task(str(path))


def test_an_unknown_kind_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(load_task_text("vt").replace('kind = "ruler"', 'kind = "rulers"'))
    with pytest.raises(UserError, match="field 'kind' must be one of"):
        load_task(str(path))


def test_training_rows_of_several_tasks_each_hold_one_drawn_at_random():
    from extrapolate.run.prepare import MixedRows

    tokenizer = WordTokenizer()
    vt, needle = (builder_for(load_task(name), tokenizer) for name in ("vt-compact", "niah_single_1"))
    rows = MixedRows((vt, needle))
    gen = torch.Generator().manual_seed(0)
    answers = []
    for _ in range(20):
        tokens, mask = rows.training_row(gen, 1024)
        answers.append(vt.tokenizer.decode(tokens[1:][mask.bool()].tolist()))
    assert any(re.fullmatch(r" ?([A-Z]{5} ){4}[A-Z]{5}", a) for a in answers)  # variable tracking's answer
    assert any(re.fullmatch(r" \d{7}\.", a) for a in answers)  # the needle's value


def test_train_tasks_change_the_model_only_when_given(tmp_path):
    from extrapolate.run import RunRequest
    from extrapolate.run.prepare import MixedRows, prepare
    from extrapolate.run.resolution import resolve

    from .helpers import make_corpus

    corpus = str(make_corpus(tmp_path / "corpus", documents=4, words=3000))
    base = dict(model="tiny", train_len=512, steps=2, corpus=corpus, tokenizer="bpe:512", eval_lens=(512,))
    plain = resolve(RunRequest(**base))
    assert plain.request.train_tasks == ()
    mixed = resolve(RunRequest(**base, train_tasks=("passkey-word", "vt-compact")))
    before, after = prepare(plain), prepare(mixed)
    assert before.passkey_identity == load_task("passkey-word").identity  # the task file's rows, as before
    assert after.passkey_identity == load_task("passkey-word").identity + "+" + load_task("vt-compact").identity
    assert isinstance(after.training_rows, MixedRows) and before.training_rows is before.passkey_builder
    with pytest.raises(UserError, match="training task"):
        resolve(RunRequest(**base, train_tasks=("no-such-task",)))
    with pytest.raises(UserError, match="passkey-fraction 0"):
        resolve(RunRequest(**base, train_tasks=("vt-compact",), passkey_fraction=0.0))


def test_effective_length_is_the_longest_length_up_to_which_every_score_passes():
    from extrapolate.report.ruler import effective_length

    assert effective_length({1024: 0.9, 2048: 0.86, 4096: 0.5, 8192: 0.9}) == 2048  # a later recovery does not count
    assert effective_length({1024: 0.8, 2048: 0.9}) is None
    assert effective_length({1024: 0.9, 2048: 0.9}, threshold=0.95) is None
    assert effective_length({1024: 1.0, 2048: 1.0}) == 2048


def test_the_ruler_average_and_its_table_come_from_the_rows():
    import pandas as pd

    from extrapolate.report.ruler import AVERAGE, effective_lengths, ruler_scores, ruler_section

    def row(task, length, value, seed=0):
        identity = load_task(task).identity
        return {"task": "ruler", "metric": "score", "status": "ok", "protocol": identity, "encoding": "rope",
                "eval_len": length, "value": value, "seed": seed}  # fmt: skip

    table = pd.DataFrame(
        [row("vt", 1024, 1.0), row("vt", 2048, 0.9), row("cwe", 1024, 0.8), row("cwe", 2048, 0.9)]
        + [row("vt", 1024, 0.9, seed=1), row("niah_single_1", 1024, 1.0), row("niah_single_1", 2048, 1.0)]
        + [row("vt", 4096, 1.0)]  # one task of three at 4096
    )
    scores = ruler_scores(table)
    assert set(scores["task"]) == {"vt", "cwe", "niah_single_1"}
    effective = effective_lengths(scores)
    assert effective[("rope", "vt")] == 4096 and effective[("rope", "cwe")] is None
    # average at 1024: (0.95 + 0.8 + 1.0) / 3 = 0.9167, at 2048: (0.9 + 0.9 + 1.0) / 3 = 0.9333, both ≥ 0.856;
    # at 4096 only vt was measured, so there is no average there and it cannot extend the effective length
    assert effective[("rope", AVERAGE)] == 2048
    text = "\n".join(ruler_section(table))
    # vt at 1024: two seeds (1.0, 0.9), so Student's t interval (clipped to the scale), straddling the bar
    assert "| vt | 95.0 [31–100]† | 90.0 | 100.0 | 4096 |" in text
    # three tasks: their average, not RULER's (which is over its 13 tasks, or its 11 without QA, said so)
    assert "| **average of 3 tasks (not RULER's 13)** | 91.7 | 93.3 | – | 2048 |" in text
    from extrapolate.report.ruler import QA_TASKS, RULER_TASKS, average_name

    assert average_name(RULER_TASKS) == "RULER average"
    assert average_name(RULER_TASKS - QA_TASKS) == "RULER average (11 tasks, no QA)"
    assert average_name(RULER_TASKS - {"cwe", "fwe"}) == "average of 11 tasks (not RULER's 13)"
    assert average_name(RULER_TASKS | {"my_task"}) == "average of 14 tasks (not RULER's 13)"  # not RULER's set
    assert average_name(RULER_TASKS - {"qa_2"}) == "average of 12 tasks (not RULER's 13)"
    assert "(4096: 1 of 3 tasks)" in text


def test_a_task_asked_in_another_prompt_format_is_its_own_row_set_not_another_seed():
    import pandas as pd

    from extrapolate.report.ruler import prompt_format, ruler_scores, ruler_section

    identity = load_task("niah_single_2").identity
    row = {"task": "ruler", "metric": "score", "status": "ok", "encoding": "rope", "eval_len": 8192, "seed": 0}
    table = pd.DataFrame(
        [{**row, "protocol": identity, "value": 1.0}, {**row, "protocol": identity + "+chat", "value": 0.92}]
    )
    assert [prompt_format(p) for p in table.protocol] == ["", "+chat"]
    scores = ruler_scores(table).set_index("label")
    assert scores.loc["rope", "score"] == 1.0 and scores.loc["rope +chat", "score"] == 0.92  # never their mean
    assert set(scores["n_seeds"]) == {1}
    text = "\n".join(ruler_section(table))
    assert "### rope\n" in text and "### rope +chat\n" in text and "96.0" not in text


def tiny_ruler_model():
    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM

    torch.manual_seed(0)
    return TransformerLM(ModelConfig(d_model=32, n_layers=2, n_heads=2, encoding="rope", max_len=2048)).eval()


def test_ruler_prompts_continuing_a_shared_prefix_get_the_logits_of_a_full_pass(monkeypatch):
    """Batches continue a prefix encoded once; each prompt's last logits equal those of the prompt run whole."""
    import dataclasses

    from extrapolate.tasks import prompt_passes
    from extrapolate.tasks.ruler import kind as ruler_kind

    task = dataclasses.replace(load_task("niah_single_2"), samples=5)
    tokenizer = ByteTokenizer()
    builder = builder_for(task, tokenizer, [torch.tensor(tokenizer.encode(ESSAY))])
    model = tiny_ruler_model()
    monkeypatch.setattr(ruler_kind, "MAX_BATCH", 2)  # three batches
    seen, greedy = [], prompt_passes.greedy_answers
    monkeypatch.setattr(
        prompt_passes, "greedy_answers", lambda m, c, last, *a, **k: seen.append(last) or greedy(m, c, last, *a, **k)
    )
    cell = ruler_kind.evaluate_ruler(model, builder, 1200, torch.device("cpu"))
    assert cell.samples == 5 and 0 <= cell.score <= 1
    prompts = sorted((builder.prompt(1200, i) for i in range(5)), key=lambda p: p.departs)
    assert [len(s) for s in seen] == [2, 2, 1]
    with torch.no_grad():
        full = model(torch.tensor([p.ids for p in prompts]))[:, -1]  # (5, V)
    torch.testing.assert_close(torch.cat(seen), full, atol=1e-4, rtol=1e-4)


def test_a_stopped_ruler_cell_resumes_from_its_logged_batches(monkeypatch, tmp_path):
    import dataclasses

    from extrapolate.tasks import prompt_passes
    from extrapolate.tasks.depth_log import DepthLog
    from extrapolate.tasks.ruler import kind as ruler_kind

    task = dataclasses.replace(load_task("niah_single_1"), samples=4)
    builder = builder_for(task, ByteTokenizer())
    model = tiny_ruler_model()
    monkeypatch.setattr(ruler_kind, "MAX_BATCH", 2)
    whole = ruler_kind.evaluate_ruler(model, builder, 1000, torch.device("cpu"))
    greedy, calls = prompt_passes.greedy_answers, []

    def stop_at_second_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return greedy(*args, **kwargs)

    log = DepthLog(tmp_path / "log.json", "cell")
    monkeypatch.setattr(prompt_passes, "greedy_answers", stop_at_second_batch)
    with pytest.raises(KeyboardInterrupt):
        ruler_kind.evaluate_ruler(model, builder, 1000, torch.device("cpu"), log=log)
    assert len(log.finished()) == 1
    calls.clear()
    monkeypatch.setattr(prompt_passes, "greedy_answers", lambda *a, **k: calls.append(1) or greedy(*a, **k))
    resumed = ruler_kind.evaluate_ruler(model, builder, 1000, torch.device("cpu"), log=log)
    assert len(calls) == 1 and resumed == whole


def test_generation_stops_at_the_end_of_sequence_token():
    from extrapolate.tasks.ruler.kind import until

    assert until([5, 6, 2, 7], 2) == [5, 6] and until([5, 6], 2) == [5, 6] and until([5, 2], None) == [5, 2]


def test_word_lists_of_another_release_are_refused(monkeypatch):
    from extrapolate.tasks.ruler import words

    words.word_list.cache_clear()
    monkeypatch.setitem(words.WORD_LISTS, "verblist.txt", "0" * 64)
    try:
        with pytest.raises(UserError, match="differs from wonderwords==2.2.0"):
            words.word_list("verblist.txt")
    finally:
        words.word_list.cache_clear()
    assert len(words.word_list("nounlist.txt")) > 6000  # the pinned lists themselves read


def test_progress_is_reported_after_every_batch(monkeypatch):
    import dataclasses

    from extrapolate.tasks.ruler import kind as ruler_kind

    task = dataclasses.replace(load_task("niah_single_1"), samples=3)
    monkeypatch.setattr(ruler_kind, "MAX_BATCH", 2)
    seen = []
    ruler_kind.evaluate_ruler(
        tiny_ruler_model(),
        builder_for(task, ByteTokenizer()),
        1000,
        torch.device("cpu"),
        on_progress=lambda *a: seen.append(a),
    )
    assert [(done, total, logged) for done, total, _, logged in seen] == [(2, 3, False), (3, 3, False)]
    assert all(summary.startswith("score ") for _, _, summary, _ in seen)


def test_the_length_check_counts_the_example_of_the_shortest_length():
    """Common words shows a shorter solved example below 4096 tokens: a length that holds it is not refused."""
    task = load_task("cwe")
    builder = builder_for(task)
    kind = file_kind(task)
    assert builder.fixed_tokens(2048) < builder.fixed_tokens(4096)
    kind.check_lengths(builder, (2048, 4096))  # the prompt at 2048 is made (test above): no refusal
    with pytest.raises(UserError, match="cwe prompts need at least"):
        kind.check_lengths(builder, (200,))


def test_a_length_whose_smallest_context_cannot_fit_is_refused_before_any_work():
    """Common words repeats each of its 10 words 30 times from 4096 tokens on: with byte-level tokens that list
    alone is longer than 4096, so 4096 is refused at the check (2048, with 6 repeats, passes)."""
    task = load_task("cwe")
    builder = builder_for(task, ByteTokenizer(), [])
    kind = file_kind(task)
    with pytest.raises(UserError, match=r"cwe cannot fit its smallest context .* \(at 4096\)"):
        kind.check_lengths(builder, (3000, 4096))


def test_chains_interleave_as_rulers_heap_shuffle_draws_them():
    """Each chain keeps its order; with chains [a1, a2] and [b1], RULER's heap puts b1 last with probability
    P(two fresh uniforms both below b1's) = 1/3 (a uniform pick among open chains would give 1/4)."""
    import random

    from extrapolate.tasks.ruler.generators import interleave

    rng, orders = random.Random(0), {}
    for _ in range(20000):
        order = tuple(interleave([["a1", "a2"], ["b1"]], rng))
        orders[order] = orders.get(order, 0) + 1
    assert set(orders) == {("a1", "a2", "b1"), ("a1", "b1", "a2"), ("b1", "a1", "a2")}
    assert orders[("a1", "a2", "b1")] / 20000 == pytest.approx(1 / 3, abs=0.015)
    assert orders[("b1", "a1", "a2")] / 20000 == pytest.approx(1 / 2, abs=0.015)


def test_the_vt_example_is_followed_by_a_blank_line_as_in_ruler():
    """RULER appends the example with its own newline and joins it to the prompt with another."""
    builder = builder_for(load_task("vt"), ByteTokenizer())
    whole = builder.tokenizer.decode(builder.prompt(2048, 0).ids)
    cut = whole.rfind("Memorize and track")
    assert re.search(r"they are: +([A-Z]{3} ){4}[A-Z]{3}\n\n$", whole[:cut]), repr(whole[cut - 40 : cut])


@pytest.mark.parametrize("length", [3000, 16384])  # the short examples below 4096, the long ones above
def test_under_a_chat_template_each_cwe_example_is_a_turn_of_its_own(length):
    """RULER formats each solved example with the model's template: user turn, then the answer as the
    assistant's; the prompt's own turn comes after them. Without a template the examples are plain text."""
    tokenizer = ByteTokenizer()
    chat = (tokenizer.encode("<user>"), tokenizer.encode("</user><assistant>"))
    task = load_task("cwe")
    builder = file_kind(task).prompt_builder(task, tokenizer, None, chat, [])
    text = tokenizer.decode(builder.prompt(length, 0).ids)
    shots = dict(task.args)["num_fewshot"]
    turns = text.split("<user>")[1:]
    assert text.startswith("<user>") and len(turns) == shots + 1
    for turn in turns[:-1]:  # an example: its list, the question, then the assistant's solved answer
        question, answer = turn.split("</user><assistant>")
        assert "What are the 10 most common words" in question
        assert re.fullmatch(r" Answer: [^\n]* are:( \d+\. \w+){10}\n", answer), answer
    assert re.search(r"</user><assistant> Answer: [^\n]* are:$", turns[-1]), turns[-1][-120:]
    plain = tokenizer.decode(file_kind(task).prompt_builder(task, tokenizer, None, None, []).prompt(length, 0).ids)
    assert "<user>" not in plain
