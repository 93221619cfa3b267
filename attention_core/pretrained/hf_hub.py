"""Hub ids for :func:`~attention_core.pretrained.hf_model.load_hf`: the files of one model
repository fetched through ``huggingface_hub`` into its own cache.

``huggingface_hub`` is the library that keeps the cache (``HF_HOME``, ``HF_HUB_CACHE``), the
offline switch (``HF_HUB_OFFLINE``) and the endpoint (``HF_ENDPOINT``); this module only
chooses what to fetch and reports the bytes:

* only the files :func:`load_hf` reads (:data:`HUB_FILES`): a repository's other weights
  (``pytorch_model.bin``, GGUF or ONNX copies) are never fetched;
* a revision that is a commit hash is looked up in the cache first: with every file there,
  no request is made at all (the lab pins a commit for every model it ships);
* a branch or tag (``None`` is ``"main"``) asks the Hub which commit it names, as
  ``huggingface_hub`` does, and falls back to the cached copy when the Hub cannot be reached;
* a download reports its progress as (bytes so far, bytes in all) to ``progress``: the
  total is the files still missing from the cache, known before the first byte.

Every failure is a ``ValueError`` naming the repository and, where it matters, the revision:
an id the Hub does not have, a revision it does not have, a gated or private repository, a
repository without safetensors weights, or no cached copy while offline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
"""An ``owner/name`` id (the Hub's own rule, ``validate_repo_id``, is applied as well)."""
COMMIT = re.compile(r"^[0-9a-f]{40}$")
HUB_FILES = (
    "config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
)
"""What :func:`~attention_core.pretrained.hf_model.load_hf` reads from a folder."""

Progress = Callable[[int, int], object]
"""Called with (bytes fetched so far, bytes to fetch in all)."""


def is_hub_id(source: str | Path) -> bool:
    """Whether ``source`` names a Hub repository (``owner/name``) and not a local folder:
    an existing folder of that name wins."""
    return isinstance(source, str) and bool(REPO_ID.match(source)) and not Path(source).exists()


def _cached(repo_id: str, revision: str, files: Sequence[str] = HUB_FILES) -> Path | None:
    """The cached snapshot of ``repo_id`` at ``revision`` when every file of ``files`` (names
    or patterns) the Hub listed is there, else None; never a request."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(
            snapshot_download(
                repo_id, revision=revision, allow_patterns=list(files), local_files_only=True
            )
        )
    except LocalEntryNotFoundError:
        return None


def cached_hub_folder(repo_id: str, revision: str, files: Sequence[str]) -> Path | None:
    """The Hub cache's snapshot folder of ``repo_id`` at ``revision`` (a commit hash) when it
    holds every one of ``files`` (plain names), else None; never a request."""
    found = _cached(repo_id, revision, files)
    if found is None or not all((found / name).is_file() for name in files):
        return None
    return found


def _progress_bar(report: Callable[[int, int | None], object]) -> type:
    """A class ``hf_hub_download`` accepts as ``tqdm_class`` (it is built with the keyword
    arguments ``total``, ``initial``, ``desc``, … and entered as a context) that hands each
    file's running byte count and its total (None when unknown) to ``report``."""

    class _Bytes:
        def __init__(self, *_args, initial: int = 0, total: int | None = None, **_kwargs):
            self.n, self.total = initial or 0, total
            report(self.n, self.total)

        def __enter__(self) -> _Bytes:
            return self

        def __exit__(self, *_exc) -> None:
            return None

        def update(self, n: int | float | None = 1) -> None:
            self.n += int(n or 0)
            report(self.n, self.total)

        def close(self) -> None:
            return None

    return _Bytes


def cached_hub_file(repo_id: str, filename: str, revision: str) -> Path | None:
    """``filename`` of ``repo_id`` at ``revision`` when the Hub cache holds it, else None;
    never a request (``huggingface_hub.try_to_load_from_cache``)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, filename, revision=revision)
    return Path(found) if isinstance(found, str) else None


def fetch_hub_file(
    repo_id: str, filename: str, revision: str, progress: Progress | None = None
) -> Path:
    """One file of a Hub repository at a pinned ``revision`` (a commit hash): the cached copy
    with no request, else downloaded into the Hub cache, ``progress(bytes so far, in all)``.

    Raises:
        ValueError: the Hub's refusal in one line, or no cached copy while the Hub cannot be
            reached (``HF_HUB_OFFLINE``, no connection).
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    found = cached_hub_file(repo_id, filename, revision)
    if found is not None:
        return found
    bar = None
    if progress is not None:
        bar = _progress_bar(lambda n, total: progress(n, total if total else n))
    try:
        return Path(hf_hub_download(repo_id, filename, revision=revision, tqdm_class=bar))
    except (RepositoryNotFoundError, RevisionNotFoundError) as err:
        raise _hub_error(repo_id, revision, err) from err
    except (HfHubHTTPError, LocalEntryNotFoundError) as err:
        raise ValueError(
            f"{repo_id}/{filename} at {revision} is not in the Hub cache and the Hub cannot be"
            f" reached ({type(err).__name__})"
        ) from err


def _hub_error(repo_id: str, revision: str | None, err: Exception) -> ValueError:
    """One line naming what the Hub refused."""
    from huggingface_hub.errors import (
        GatedRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(err, GatedRepoError):
        return ValueError(f"{repo_id} is gated: accept its terms on the Hub and set HF_TOKEN")
    if isinstance(err, RevisionNotFoundError):
        return ValueError(f"{repo_id} has no revision {revision!r}")
    if isinstance(err, RepositoryNotFoundError):
        return ValueError(f"no model {repo_id!r} on the Hub (or it is private: set HF_TOKEN)")
    return ValueError(f"cannot fetch {repo_id} from the Hub: {err}")


def _check_id(repo_id: str, revision: str | None) -> None:
    """A ``ValueError`` for a malformed id (ours and the Hub's own rule) or revision."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if not isinstance(repo_id, str) or not REPO_ID.match(repo_id):
        raise ValueError(f"a Hub id is owner/name, got {repo_id!r}")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise ValueError(f"not a Hub id: {repo_id!r} ({err})") from err
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ValueError(f"revision must be a commit hash, branch or tag, got {revision!r}")


def _hub_plan(repo_id: str, revision: str | None, files: Sequence[str]) -> list | Path:
    """What the Hub would send of ``files`` (``snapshot_download``'s dry run: each file's
    commit, size and whether it is missing here), or the cached folder when the Hub cannot
    be reached and a copy is here.

    Raises:
        ValueError: an id or revision the Hub does not have; no ``.safetensors`` weights;
            the Hub out of reach with no cached copy.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        DryRunError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        plan = snapshot_download(
            repo_id, revision=revision, allow_patterns=list(files), dry_run=True
        )
    except (DryRunError, HfHubHTTPError) as err:
        cause = err.__cause__ if isinstance(err, DryRunError) else err  # what the Hub answered
        if isinstance(cause, RepositoryNotFoundError | RevisionNotFoundError):
            raise _hub_error(repo_id, revision, cause) from err
        found = _cached(repo_id, revision or "main", files)
        if found is not None:
            return found
        raise ValueError(
            f"{repo_id} at {revision or 'main'} is not in the Hub cache and the Hub cannot be"
            f" reached ({type(cause or err).__name__})"
        ) from err
    if not any(f.filename.endswith(".safetensors") for f in plan):
        raise ValueError(f"{repo_id} has no .safetensors weights (the lab reads those only)")
    return plan


def resolve_commit(repo_id: str, revision: str | None = None) -> str:
    """The commit ``revision`` of ``repo_id`` names: a commit hash as it is (no request), a
    branch or tag (None: ``"main"``) as the Hub answers, or, the Hub out of reach, as the
    cache last saw it.

    Raises:
        ValueError: as :func:`fetch_hub_model`.
    """
    _check_id(repo_id, revision)
    if revision is not None and COMMIT.match(revision):
        return revision
    plan = _hub_plan(repo_id, revision, HUB_FILES)
    return plan.name if isinstance(plan, Path) else plan[0].commit_hash


def fetch_hub_model(
    repo_id: str,
    revision: str | None = None,
    progress: Progress | None = None,
    files: Sequence[str] = HUB_FILES,
) -> Path:
    """The local folder of ``repo_id`` at ``revision``, fetched into the Hub cache when needed.

    Args:
        repo_id: ``owner/name``.
        revision: a commit hash (looked up in the cache first), a branch or a tag; None:
            ``"main"``.
        progress: called with (bytes so far, bytes in all) while files are fetched.
        files: the names or patterns fetched (default :data:`HUB_FILES`, what
            :func:`~attention_core.pretrained.hf_model.load_hf` reads).

    Returns:
        The snapshot folder in the cache, holding the files of ``files`` the repository
        has.

    Raises:
        ValueError: a malformed id or revision; an id or revision the Hub does not have; a
            gated or private repository; no ``.safetensors`` weights; offline (or the Hub
            unreachable) with no cached copy.
    """
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    _check_id(repo_id, revision)
    if (
        revision is not None
        and COMMIT.match(revision)
        and (found := _cached(repo_id, revision, files))
    ):
        return found
    plan = _hub_plan(repo_id, revision, files)
    if isinstance(plan, Path):  # offline, or the Hub unreachable: the copy already here
        return plan
    commit = plan[0].commit_hash
    wanted = [f for f in plan if f.will_download]
    total = sum(f.file_size or 0 for f in wanted)
    done = 0
    if progress is not None:
        progress(0, total)
    for entry in wanted:
        bar = None
        if progress is not None:
            before = done
            bar = _progress_bar(
                lambda n, _total, before=before: progress(min(before + n, total), total)
            )
        try:
            hf_hub_download(repo_id, entry.filename, revision=commit, tqdm_class=bar)
        except (HfHubHTTPError, LocalEntryNotFoundError) as err:
            raise _hub_error(repo_id, revision, err) from err
        done += entry.file_size or 0
    # Every file is in the cache now; the same call without dry_run fetches nothing more but
    # writes what a later offline load looks up (the branch's commit, the file list).
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=list(files)))
    except (HfHubHTTPError, LocalEntryNotFoundError) as err:
        raise _hub_error(repo_id, revision, err) from err
