"""Voice data sources: FSDD, AudioMNIST, LibriSpeech, Kaldi data directories (VoicePrivacy) and a folder per
speaker (the seeded synthesizer ``voice.synthetic`` is in :mod:`bioanon_voice.synthetic`).

Every source yields an ``audio`` payload (ragged float32 in [-1, 1], mono) with ``sample_rate`` in the
metadata. Files are read with ``soundfile``; with ``sample_rate`` > 0 every file is resampled to it
(``librosa.resample``), with ``sample_rate = 0`` the data set's native rate is kept and a file at another rate
is a bad file. Bad files (corrupt, empty, not audio, wrong rate) raise :class:`~bioanon.errors.DatasetError`
naming the file, or with ``skip_bad_files = True`` are skipped and listed in ``metadata["skipped_files"]``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np

from bioanon.api import DataError, DatasetSource, Metadata, param, read_metadata_csv


class DatasetError(DataError):
    """A voice data set that cannot be loaded (missing, empty, or a bad file); a :class:`~bioanon.errors.DataError`
    (so also a BioanonError and a ValueError)."""


_AUDIO_EXT = (".wav", ".flac", ".ogg", ".aiff", ".aif")


class BadAudioFile(DatasetError):
    """A file that cannot be used as a voice sample (corrupt, empty, not audio, wrong sample rate)."""


def read_audio(path: Path, target_sr: int, native_sr: int | None) -> tuple[np.ndarray, int]:
    """Read one file as mono float32; resample to ``target_sr`` (> 0) or require ``native_sr``."""
    import soundfile as sf

    name = os.fsencode(path)
    try:
        name.decode("utf-8")  # soundfile cannot open such a name, and a sample id is text
    except UnicodeDecodeError:
        shown = name.decode("utf-8", "backslashreplace")
        raise BadAudioFile(f"{shown}: the file name is not valid UTF-8; rename the file") from None
    try:
        x, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001 - soundfile raises LibsndfileError/RuntimeError/TypeError
        raise BadAudioFile(f"{path}: cannot read as audio ({type(e).__name__}: {e})") from None
    if x.size == 0:
        raise BadAudioFile(f"{path}: empty audio file (0 samples)")
    x = x.mean(axis=1) if x.shape[1] > 1 else x[:, 0]
    if not np.all(np.isfinite(x)):
        raise BadAudioFile(f"{path}: non-finite sample values")
    if target_sr > 0:
        if sr != target_sr:
            import librosa

            x = librosa.resample(x, orig_sr=sr, target_sr=target_sr, res_type="soxr_hq").astype(np.float32)
        return x, target_sr
    if native_sr is not None and sr != native_sr:
        raise BadAudioFile(
            f"{path}: sample rate {sr} Hz, expected {native_sr} Hz (set the parameter "
            f"sample_rate to resample every file)"
        )
    return x, sr


@attrs.define(kw_only=True)
class _FileSource(DatasetSource):
    """Shared loading: subclasses list ``(path, subject, attributes)`` records in ``_records(root)``."""

    trait: ClassVar[str] = "voice"
    native_rate: ClassVar[int | None] = None

    sample_rate: int = param(
        0,
        help="resample every file to this rate in Hz (0 = keep the data set's native "
        "rate; a file at another rate is then a bad file)",
        low=0,
    )
    skip_bad_files: bool = param(
        False,
        help="skip corrupt/empty/non-audio/wrong-rate files and list them in "
        "metadata['skipped_files'] (default: raise naming the file)",
    )
    max_per_speaker: int = param(
        0,
        help="keep at most this many utterances per speaker (0 = all), taken in a "
        "stable order that spreads over the utterance index",
        low=0,
    )
    speakers: tuple[str, ...] = param((), help="load only these speakers (empty = all)")

    def _records(self, root: Path) -> list[tuple]:
        """``(path, subject, attributes)`` per file, optionally with a 4th element: the sample id (default: the
        path relative to the root)."""
        raise NotImplementedError

    def _order_key(self, rec) -> tuple:
        return (str(rec[0]),)

    def _unread(self, root: Path) -> list[dict]:
        """Files of the data folder that are not read as samples but should have been (``{"file", "reason"}``):
        listed in ``metadata["unread_files"]``, which the core's data checks report (``[dataset] on_bad``)."""
        return []

    def load(self, path=None):
        from bioanon.api import SampleTable

        if path is None:
            raise DatasetError(f"{self.id}: needs a path to the data set")
        root = Path(path)
        if not root.exists():
            raise DatasetError(f"{self.id}: no such file or directory: {str(root)!r}")
        recs = self._records(root)
        if self.speakers:
            wanted = set(self.speakers)
            recs = [r for r in recs if r[1] in wanted]
        recs.sort(key=lambda r: (r[1],) + self._order_key(r))
        if self.max_per_speaker:
            by: dict[str, list] = {}
            for r in recs:
                by.setdefault(r[1], []).append(r)
            recs = [r for s in sorted(by) for r in by[s][: self.max_per_speaker]]
        if not recs:
            raise DatasetError(f"{self.id}: no audio files found under {str(root)!r}")
        audio, subjects, ids, attrs_, skipped = [], [], [], [], []
        rate = self.sample_rate or self.native_rate
        for p, subject, at, *sid in recs:
            try:
                x, sr = read_audio(p, self.sample_rate, rate)
            except BadAudioFile as e:
                if not self.skip_bad_files:
                    raise
                skipped.append({"file": str(p), "reason": str(e).split(": ", 1)[-1]})
                continue
            rate = sr
            audio.append(x)
            subjects.append(subject)
            ids.append(sid[0] if sid else str(p.relative_to(root)) if p.is_relative_to(root) else p.name)
            attrs_.append(at)
        if not audio:
            raise DatasetError(f"{self.id}: every file under {str(root)!r} was bad ({len(skipped)} skipped)")
        names = sorted({k for a in attrs_ for k in a})
        attributes = {k: np.array([a.get(k) for a in attrs_], dtype=object) for k in names}
        for k, v in attributes.items():
            if all(isinstance(e, (int, np.integer)) for e in v):
                attributes[k] = v.astype(np.int64)
        return SampleTable.from_arrays(
            subject=np.array(subjects, dtype=object),
            sample_id=np.array(ids, dtype=object),
            payloads={"audio": audio},
            attributes=attributes,
            metadata={
                "trait": "voice",
                "source": self.id,
                "sample_rate": int(rate),
                "skipped_files": skipped,
                "unread_files": self._unread(root),
                "params": self.get_params(),
            },
        )


def _speaker_attrs(recs: list[tuple[Path, str, dict]], meta, names: tuple[str, ...]) -> None:
    """Add the per-speaker attributes ``names`` of ``meta`` (a per-subject :class:`Metadata`) to the records."""
    cols = meta.join([], [r[1] for r in recs])
    for j, (_, _, at) in enumerate(recs):
        for k in names:
            if k in cols and cols[k][j] is not None:
                at[k] = cols[k][j]


@attrs.define(kw_only=True)
class Fsdd(_FileSource):
    """Free Spoken Digit Dataset: ``recordings/{digit}_{speaker}_{index}.wav`` (8 kHz) and ``speakers.csv``.

    Attributes: ``digit`` (int, the spoken content), ``index``, and the speaker's ``gender``/``accent`` from
    ``speakers.csv`` when present. The path is the data set folder (or its ``recordings`` folder).
    ``speakers.csv`` is per speaker (a ``speaker`` column): a speaker's rows must agree (else an error naming
    the speaker and lines), speakers of the recordings without a row get a warning and null attributes, rows
    of speakers without recordings are ignored (:mod:`bioanon.metadata`)."""

    id: ClassVar[str] = "voice.fsdd"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("digit", "index", "gender", "accent")
    native_rate: ClassVar[int | None] = 8000
    reference: ClassVar[str] = "github:Jakobovski/free-spoken-digit-dataset"

    def _order_key(self, rec):
        return (rec[2]["index"], rec[2]["digit"])

    def _records(self, root):
        rec_dir = root / "recordings" if (root / "recordings").is_dir() else root
        out = []
        for p in rec_dir.iterdir():
            m = re.fullmatch(r"(\d)_([^_]+)_(\d+)\.wav", p.name)
            if not m:
                continue
            out.append((p, m.group(2), {"digit": int(m.group(1)), "index": int(m.group(3))}))
        for f in (root / "speakers.csv", rec_dir.parent / "speakers.csv"):
            if f.is_file():
                _speaker_attrs(out, read_metadata_csv(f, per="subject", parse=False), ("gender", "accent"))
                break
        return out


@attrs.define(kw_only=True)
class AudioMnist(_FileSource):
    """AudioMNIST: ``data/<NN>/<digit>_<NN>_<index>.wav`` (48 kHz) and ``data/audioMNIST_meta.txt`` (JSON).

    Attributes: ``digit``, ``index`` and the speaker's ``gender``, ``age``, ``accent``, ``native_speaker`` from
    the meta file when present. The path is the repository folder (with ``data/``) or ``data/`` itself.
    The meta file is per speaker (keys = the speaker folders' names): a key given twice is an error, speakers
    without an entry get a warning and null attributes; a file whose name's speaker differs from its folder is
    an error naming it."""

    id: ClassVar[str] = "voice.audiomnist"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("digit", "index", "gender", "age", "accent", "native_speaker")
    native_rate: ClassVar[int | None] = 48000
    reference: ClassVar[str] = "github:soerenab/AudioMNIST"

    def _order_key(self, rec):
        return (rec[2]["index"], rec[2]["digit"])

    def _records(self, root):
        data = root / "data" if (root / "data").is_dir() else root
        meta = None
        meta_file = data / "audioMNIST_meta.txt"
        if meta_file.is_file():
            meta = self._meta(meta_file)
        out = []
        for d in sorted(p for p in data.iterdir() if p.is_dir()):
            for p in d.iterdir():
                m = re.fullmatch(r"(\d)_(\d+)_(\d+)\.wav", p.name)
                if not m:
                    continue
                if m.group(2) != d.name:
                    raise DatasetError(
                        f"{p}: the file name says speaker {m.group(2)!r}, but it is in the folder {d.name!r}"
                    )
                out.append((p, d.name, {"digit": int(m.group(1)), "index": int(m.group(3))}))
        if meta is not None:
            _speaker_attrs(out, meta, ("gender", "accent", "native_speaker", "age"))
        return out

    @staticmethod
    def _meta(meta_file: Path) -> Metadata:
        """The JSON meta file (speaker -> fields) as per-speaker :class:`Metadata`; a repeated key is an error."""
        import json

        def pairs(items):
            keys = [k for k, _ in items]
            dup = sorted({k for k in keys if keys.count(k) > 1})
            if dup:
                raise DatasetError(f"{meta_file}: speaker key(s) {dup} appear more than once")
            return dict(items)

        try:
            raw = json.loads(meta_file.read_text(encoding="utf-8"), object_pairs_hook=pairs)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{meta_file}: not valid JSON ({e})") from None
        except UnicodeDecodeError as e:
            raise DatasetError(f"{meta_file}: not UTF-8 text ({e.reason} at byte {e.start}); is it JSON?") from None
        if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
            raise DatasetError(f"{meta_file}: expected a JSON object of speaker -> object of fields")
        keys = list(raw)
        cols: dict[str, list] = {
            k: [str(v[k]) if k in v else None for v in raw.values()] for k in ("gender", "accent", "native_speaker")
        }
        cols["age"] = [_int_or_none(v.get("age")) for v in raw.values()]
        return Metadata(str(meta_file), "subject", "speaker", keys, list(range(1, len(keys) + 1)), cols)


def _int_or_none(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


@attrs.define(kw_only=True)
class LibriSpeech(_FileSource):
    """LibriSpeech: ``<subset>/<speaker>/<chapter>/*.flac`` (16 kHz) and ``SPEAKERS.TXT``.

    The path is a subset folder (e.g. ``train-clean-100``) or the ``LibriSpeech`` folder (all subsets below it).
    Attribute columns: ``chapter``, ``text`` (the utterance's transcript from the chapter's ``*.trans.txt``;
    null without one), ``gender`` (the speaker's ``F``/``M``, read from the ``SEX`` field of ``SPEAKERS.TXT``;
    the column is named ``gender``, not ``sex``) and ``subset`` (the ``SUBSET`` field). ``SPEAKERS.TXT`` is
    looked up next to the path and one level up. A speaker listed twice with different values is an error
    naming the lines; speakers without a line get a warning and null attributes; lines of speakers not
    loaded (other subsets) are ignored."""

    id: ClassVar[str] = "voice.librispeech"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("chapter", "text", "gender", "subset")
    native_rate: ClassVar[int | None] = 16000
    reference: ClassVar[str] = "https://www.openslr.org/12"

    @staticmethod
    def _speakers(root: Path) -> Metadata | None:
        for f in (root / "SPEAKERS.TXT", root.parent / "SPEAKERS.TXT"):
            if f.is_file():
                keys, lines, gender, subset = [], [], [], []
                text = f.read_text(encoding="utf-8", errors="replace")
                for line_no, line in enumerate(text.splitlines(), start=1):
                    if line.startswith(";") or "|" not in line:
                        continue
                    parts = [p.strip() for p in line.split("|")]
                    if len(parts) >= 3:
                        keys.append(parts[0])
                        lines.append(line_no)
                        gender.append(parts[1])
                        subset.append(parts[2])
                return Metadata(str(f), "subject", "ID", keys, lines, {"gender": gender, "subset": subset})
        return None

    @staticmethod
    def _transcripts(chapter_dir: Path) -> dict[str, str]:
        """``<speaker>-<chapter>.trans.txt`` of a chapter folder: utterance id → text (empty when absent)."""
        f = chapter_dir / f"{chapter_dir.parent.name}-{chapter_dir.name}.trans.txt"
        if not f.is_file():
            return {}
        out = {}
        for line_no, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if line.strip():
                utt, _, text = line.strip().partition(" ")
                if utt in out:
                    raise DatasetError(f"{f}:{line_no}: utterance {utt!r} is listed twice")
                out[utt] = text
        return out

    def _records(self, root):
        out = []
        texts: dict[Path, dict[str, str]] = {}
        for p in root.rglob("*.flac"):
            chapter, speaker = p.parent.name, p.parent.parent.name
            if not speaker.isdigit():
                continue
            if p.parent not in texts:
                texts[p.parent] = self._transcripts(p.parent)
            out.append((p, speaker, {"chapter": chapter, "text": texts[p.parent].get(p.stem)}))
        meta = self._speakers(root)
        if meta is not None and out:
            _speaker_attrs(out, meta, ("gender", "subset"))
        return out


@attrs.define(kw_only=True)
class SpeakerFolder(_FileSource):
    """A folder per speaker: ``<root>/<speaker>/**/*.{wav,flac,ogg}``, optional ``metadata.csv``.

    The metadata CSV (``metadata_file``, relative to the root) is per file when it has a file column (``file``,
    ``path``, ``filename``, …: the path relative to the root, e.g. ``ann/u0.wav``), else per speaker with a
    speaker column (``speaker``, ``subject``, …); its other columns become attributes (numbers parsed, empty
    cells null). Key columns never become attributes. A per-file CSV's speaker column must match the folder;
    a file listed twice, a row naming no file, or conflicting rows of one speaker are errors naming the rows;
    files (speakers) without a row get null attributes and a warning. The full rules: :mod:`bioanon.metadata`.
    With ``sample_rate = 0`` every file must have the rate of the first file read. Other files in a speaker folder
    (not ``.wav``/``.flac``/``.ogg``/``.aiff``; hidden files aside) are listed in ``metadata["unread_files"]``: the
    import reports them (an error by default, a warning with ``[dataset] on_bad = "skip"`` or ``"warn"``)."""

    id: ClassVar[str] = "voice.folder"

    def _unread(self, root):
        return [
            {"file": str(p), "reason": f"not an audio file ({p.suffix or 'no extension'})"}
            for d in sorted(q for q in root.iterdir() if q.is_dir() and not q.name.startswith("."))
            for p in sorted(d.rglob("*"))
            if p.is_file()
            and p.suffix.lower() not in _AUDIO_EXT
            and not any(part.startswith(".") for part in p.relative_to(root).parts)
        ]

    metadata_file: str = param("metadata.csv", help="CSV of attributes, relative to the root (missing = none)")

    def _records(self, root):
        out = []
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            for p in sorted(d.rglob("*")):
                if p.is_file() and p.suffix.lower() in _AUDIO_EXT:
                    out.append((p, d.name, {}))
        mf = root / self.metadata_file
        if mf.is_file() and out:
            cols = read_metadata_csv(mf).join(
                [p.relative_to(root).as_posix() for p, _, _ in out], [s for _, s, _ in out]
            )
            for j, (_, _, at) in enumerate(out):
                at.update({k: v[j] for k, v in cols.items()})
        return out


class KaldiDataError(DatasetError):
    """A Kaldi-style data directory that cannot be read; the message names the file and line."""


#: The values of the ``role`` column (the core's enrolment/trial split, :data:`bioanon.evaluation.tasks.ROLE_COLUMN`).
ENROLMENT, TRIAL = "enrolment", "trial"
_SEX = {"m": "m", "f": "f", "male": "m", "female": "f"}


def _kaldi_lines(path: Path, min_fields: int, what: str) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of the non-blank lines of a Kaldi table file; fewer than ``min_fields``
    whitespace-separated fields is an error naming the file and line (``what`` says what a line holds)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise KaldiDataError(f"{path}: not UTF-8 text ({e})") from None
    out = []
    for no, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < min_fields:
            raise KaldiDataError(f"{path}, line {no}: expected {what}, got {line.strip()!r}")
        out.append((no, fields))
    return out


def _unique_keys(path: Path, rows: list[tuple[int, list[str]]]) -> dict[str, tuple[int, list[str]]]:
    """The rows by their first field; a key given twice is an error naming both lines."""
    out: dict[str, tuple[int, list[str]]] = {}
    for no, fields in rows:
        if fields[0] in out:
            raise KaldiDataError(
                f"{path}, line {no}: {fields[0]!r} is listed again (first on line {out[fields[0]][0]})"
            )
        out[fields[0]] = (no, fields)
    return out


def _decode_only(command: str) -> str | None:
    """The input file of a ``wav.scp`` pipe that only decodes it — ``flac -c -d -s FILE |`` (the flags in any
    order) or ``sox FILE -t wav - |`` — whose output is exactly the file's samples; None for any other command
    (effects, resampling, other programs), which bioanon does not run."""
    import shlex

    try:
        words = shlex.split(command.strip().removesuffix("|"))
    except ValueError:
        return None
    if len(words) == 5 and Path(words[0]).name == "flac" and sorted(words[1:4]) == ["-c", "-d", "-s"]:
        return words[4]
    if len(words) == 5 and Path(words[0]).name == "sox" and words[2:] == ["-t", "wav", "-"]:
        return words[1]
    return None


@attrs.define(kw_only=True)
class KaldiDir(_FileSource):
    """A Kaldi-style data directory (``wav.scp``, ``utt2spk``, ``spk2gender``, ``text``) or a folder of them,
    with the VoicePrivacy Challenge's enrolment and trial lists.

    The path is one data directory (it holds ``wav.scp``) or a folder whose sub-folders are data directories
    (e.g. VoicePrivacy's ``data/`` with ``libri_dev_enrolls``, ``libri_dev_trials_f``, ``libri_dev_trials_m``,
    ...; ``subsets`` picks some). Per directory:

    * ``wav.scp`` (required): ``<utterance> <wav path>``. Plain paths are read (absolute, or relative to
      ``wav_root``; by default relative to the data directory, else to its first ancestor folder, up to 3 levels
      up, where the file exists: Kaldi recipes write paths relative to the recipe folder), and so are the
      decode-only pipes ``flac -c -d -s FILE |`` and ``sox FILE -t wav - |`` (FILE is read directly; nothing is
      run). Other piped commands (effects, resampling, ``sph2pipe ... |``), archive offsets (``foo.ark:123``)
      and a ``segments`` file are not supported: a DataError names the file and line (convert the audio to
      files first, e.g. ``wav-copy scp:wav.scp ark,scp:...`` or ``sox in.flac out.wav``).
    * ``utt2spk`` (required): ``<utterance> <speaker>``; every utterance of ``wav.scp`` needs one and every
      utterance in it must be in ``wav.scp``.
    * ``spk2gender`` (optional): ``<speaker> m|f`` → the per-sample attribute ``sex`` (``"m"``/``"f"``); when
      present it must cover every speaker.
    * ``text`` (optional): ``<utterance> <transcript>`` → the attribute ``text`` (reference transcripts, e.g. for
      a word error rate); utterances without a line get null.
    * ``enrolls`` (optional, VoicePrivacy): one utterance per line, used for enrolment → ``role = "enrolment"``.
    * ``trials`` (optional, VoicePrivacy): ``<enrolment speaker> <utterance> target|nontarget`` → the
      utterance gets ``role = "trial"``; ``target`` must name the utterance's own speaker, ``nontarget``
      another one.

    Columns: ``subject`` = the speaker, ``sample_id`` = the utterance id (unique over the directories loaded),
    attributes ``subset`` (the data directory's name), ``role`` (``"enrolment"`` / ``"trial"`` / null), ``sex``,
    ``text``. With ``role`` present the evaluation enrols the evaluation subjects on their enrolment utterances
    and probes with their trial utterances (instead of a random enrolment share); the trial list's pairs
    themselves are not used: every trial is scored against every enrolled speaker. A directory with an
    ``enrolls`` or ``trials`` file sets the table metadata ``protocol = "voiceprivacy"``, so the report names the
    attacker scenarios as the challenge does (ignorant = naive, lazy-informed = lazy, semi-informed = parrot).
    Errors name the file and line (:class:`KaldiDataError`, a :class:`~bioanon.errors.DataError`)."""

    id: ClassVar[str] = "voice.kaldi"
    attribute_names: ClassVar[tuple[str, ...] | None] = ("subset", "role", "sex", "text")
    reference: ClassVar[str] = (
        "https://kaldi-asr.org/doc/data_prep.html; VoicePrivacy 2024 evaluation plan, arXiv:2404.02677"
    )

    subsets: tuple[str, ...] = param((), help="load only these data directories (sub-folder names; empty = all)")
    wav_root: str = param(
        "",
        help="folder that relative wav.scp paths are relative to (empty = the data "
        "directory, else its first ancestor, up to 3 levels up, where the file exists)",
    )

    def _order_key(self, rec):
        return (rec[2]["subset"], rec[3])

    def _data_dirs(self, root: Path) -> list[Path]:
        """The data directories under ``root`` (itself when it holds ``wav.scp``), filtered by ``subsets``."""
        if root.is_file():
            raise KaldiDataError(
                f"{self.id}: {str(root)!r} is a file; give the data directory (with wav.scp) or "
                f"the folder holding data directories"
            )
        dirs = (
            [root]
            if (root / "wav.scp").is_file()
            else sorted(d for d in root.iterdir() if d.is_dir() and (d / "wav.scp").is_file())
        )
        if not dirs:
            raise KaldiDataError(
                f"{self.id}: no wav.scp in {str(root)!r} or in its sub-folders (a Kaldi data "
                f"directory holds wav.scp and utt2spk)"
            )
        if self.subsets:
            names = {d.name for d in dirs}
            missing = [s for s in self.subsets if s not in names]
            if missing:
                raise KaldiDataError(
                    f"{self.id}: subsets {missing} not found under {str(root)!r}; data "
                    f"directories there: {sorted(names)}"
                )
            dirs = [d for d in dirs if d.name in self.subsets]
        return dirs

    def is_voiceprivacy(self, root: Path) -> bool:
        """Whether a loaded data directory has VoicePrivacy enrolment or trial lists."""
        return any((d / "enrolls").is_file() or (d / "trials").is_file() for d in self._data_dirs(root))

    def load(self, path=None):
        table = super().load(path)
        if self.is_voiceprivacy(Path(path)):
            table = table.with_metadata(protocol="voiceprivacy")
        return table

    def _wav_path(self, d: Path, value: str, where: str) -> Path:
        """The file a ``wav.scp`` entry names (see the class docstring)."""
        if value.rstrip().endswith("|") or value.lstrip().startswith("|"):
            decoded = _decode_only(value)
            if decoded is None:
                raise KaldiDataError(
                    f"{where}: piped commands are not supported ({value.strip()!r}); bioanon reads plain audio file "
                    f"paths and the decode-only pipes 'flac -c -d -s FILE |' and 'sox FILE -t wav - |' (it reads "
                    f"FILE itself and runs nothing): convert the audio to files first (run the command into a .wav "
                    f"file) and list those"
                )
            value = decoded
        if re.search(r"\.ark:\d+$", value):
            raise KaldiDataError(
                f"{where}: archive offsets are not supported ({value.strip()!r}); extract the "
                f"audio to files first (wav-copy ark:... ark,scp:...)"
            )
        p = Path(value)
        if p.is_absolute():
            return p
        if self.wav_root:
            return Path(self.wav_root) / p
        bases = [d, *list(d.parents)[:3]]
        for base in bases:
            if (base / p).is_file():
                return base / p
        if self.skip_bad_files:
            return d / p  # reported as a skipped file
        raise KaldiDataError(
            f"{where}: audio file {value!r} not found (looked relative to "
            f"{', '.join(repr(str(b)) for b in bases)}; set wav_root)"
        )

    def _records(self, root):
        out: list[tuple] = []
        seen: dict[str, str] = {}
        for d in self._data_dirs(root):
            out += self._dir_records(d, seen)
        if not any(r[2]["role"] for r in out):  # no enrolment/trial lists: no role column
            for r in out:
                del r[2]["role"]
        return out

    def _dir_records(self, d: Path, seen: dict[str, str]) -> list[tuple]:
        """The records of one data directory; ``seen`` maps utterance ids already loaded to their wav.scp line."""
        if (d / "segments").is_file():
            raise KaldiDataError(
                f"{d / 'segments'}: segments files (utterances cut from longer recordings) are "
                f"not supported; extract each segment to its own audio file first"
            )
        scp, u2s = d / "wav.scp", d / "utt2spk"
        if not u2s.is_file():
            raise KaldiDataError(f"{d}: no utt2spk file (a Kaldi data directory needs wav.scp and utt2spk)")
        wavs: dict[str, tuple[int, Path]] = {}
        for no, fields in _kaldi_lines(scp, 2, "'<utterance> <wav path>'"):
            utt = fields[0]
            where = f"{scp}, line {no}"
            if utt in wavs:
                raise KaldiDataError(f"{where}: utterance {utt!r} is listed again (first on line {wavs[utt][0]})")
            if utt in seen:
                raise KaldiDataError(
                    f"{where}: utterance {utt!r} is also in {seen[utt]}; load the data "
                    f"directories separately (parameter subsets) or give them distinct ids"
                )
            value = " ".join(fields[1:]) if len(fields) > 2 else fields[1]
            wavs[utt] = (no, self._wav_path(d, value, where))
        spk = {}
        for utt, (no, fields) in _unique_keys(u2s, _kaldi_lines(u2s, 2, "'<utterance> <speaker>'")).items():
            if len(fields) != 2:
                raise KaldiDataError(f"{u2s}, line {no}: expected '<utterance> <speaker>', got {' '.join(fields)!r}")
            if utt not in wavs:
                raise KaldiDataError(f"{u2s}, line {no}: utterance {utt!r} is not in {scp}")
            spk[utt] = fields[1]
        for utt, (no, _) in wavs.items():
            if utt not in spk:
                raise KaldiDataError(f"{scp}, line {no}: utterance {utt!r} has no speaker in {u2s}")
        sex = self._spk2gender(d, set(spk.values()))
        text = {}
        if (d / "text").is_file():
            f = d / "text"
            for utt, (no, fields) in _unique_keys(f, _kaldi_lines(f, 1, "'<utterance> <transcript>'")).items():
                if utt not in wavs:
                    raise KaldiDataError(f"{f}, line {no}: utterance {utt!r} is not in {scp}")
                text[utt] = " ".join(fields[1:])
        role = self._roles(d, wavs, spk)
        out = []
        for utt, (no, p) in wavs.items():
            seen[utt] = f"{scp}, line {no}"
            at = {"subset": d.name, "role": role.get(utt)}
            if sex is not None:
                at["sex"] = sex[spk[utt]]
            if text:
                at["text"] = text.get(utt)
            out.append((p, spk[utt], at, utt))
        return out

    @staticmethod
    def _spk2gender(d: Path, speakers: set[str]) -> dict[str, str] | None:
        f = d / "spk2gender"
        if not f.is_file():
            return None
        sex = {}
        for s, (no, fields) in _unique_keys(f, _kaldi_lines(f, 2, "'<speaker> m|f'")).items():
            v = _SEX.get(fields[1].lower()) if len(fields) == 2 else None
            if v is None:
                raise KaldiDataError(f"{f}, line {no}: expected '<speaker> m|f', got {' '.join(fields)!r}")
            sex[s] = v
        missing = sorted(speakers - set(sex))
        if missing:
            raise KaldiDataError(
                f"{f}: no line for the speaker(s) {missing[:5]}{' …' if len(missing) > 5 else ''} of {d / 'utt2spk'}"
            )
        return sex

    @staticmethod
    def _roles(d: Path, wavs: dict, spk: dict[str, str]) -> dict[str, str]:
        """Utterance → ``"enrolment"`` (listed in ``enrolls``) or ``"trial"`` (in ``trials``)."""
        role: dict[str, str] = {}
        where: dict[str, str] = {}
        f = d / "enrolls"
        if f.is_file():
            for no, fields in _kaldi_lines(f, 1, "an utterance id"):
                utt = fields[0]
                if len(fields) != 1 or utt not in wavs:
                    raise KaldiDataError(
                        f"{f}, line {no}: expected an utterance id of {d / 'wav.scp'}, got {' '.join(fields)!r}"
                    )
                role[utt], where[utt] = ENROLMENT, f"{f}, line {no}"
        f = d / "trials"
        if f.is_file():
            for no, fields in _kaldi_lines(f, 3, "'<enrolment speaker> <utterance> target|nontarget'"):
                if len(fields) != 3 or fields[2] not in ("target", "nontarget"):
                    raise KaldiDataError(
                        f"{f}, line {no}: expected '<enrolment speaker> <utterance> "
                        f"target|nontarget', got {' '.join(fields)!r}"
                    )
                model, utt, kind = fields
                if utt not in wavs:
                    raise KaldiDataError(f"{f}, line {no}: utterance {utt!r} is not in {d / 'wav.scp'}")
                if (kind == "target") != (model == spk[utt]):
                    raise KaldiDataError(
                        f"{f}, line {no}: a {kind} trial of speaker {model!r}, but utterance "
                        f"{utt!r} is of speaker {spk[utt]!r} ({d / 'utt2spk'})"
                    )
                if role.get(utt) == ENROLMENT:
                    raise KaldiDataError(
                        f"{f}, line {no}: utterance {utt!r} is a trial and also an enrolment utterance ({where[utt]})"
                    )
                role[utt] = TRIAL
        return role
