"""The workspace's secrets are out of a candidate's reach, whatever it runs: its repository
(`.git`, where remotes keep tokens), KernelBrain's store (`.kernelbrain/kernelbrain.db`,
verdicts and sources)
and dotenv files, in the kernel's folder and every folder above it up to the repository's
root, and secret-looking files (dotenv, keys, credentials, nested repositories) anywhere below
that root. The kernel's own modules stay readable. Candidates run past the gate (straight to the
sandboxed harness), as if the gate had been bypassed."""

from __future__ import annotations

import subprocess

import pytest

from kernelbrain.engine.evaluate import sandbox
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import at_top, base_task

SECRET = "kb-workspace-secret-31d4"

# Each reads what it can and, if anything came back, fails with it in its message; a candidate
# that reads nothing is the honest kernel and passes.
READERS = {
    "by absolute path": (
        "import os as kb_os",
        "kb_got = []",
        "for kb_p in ['@WS@/.env', '@WS@/.env.local', '@WS@/.git/config', '@ROOT@/.env',"
        " '@WS@/.env.production', '@KEYS@',"
        " '@WS@/.kernelbrain/kernelbrain.db', '@ROOT@/.git/config', '@ROOT@/.netrc']:",
        "    try:",
        "        kb_got.append(open(kb_p).read())",
        "    except OSError:",
        "        pass",
        "if kb_got:",
        "    raise RuntimeError('leaked: ' + ' | '.join(kb_got))",
    ),
    "by walking up from the kernel's own module": (
        "import os as kb_os, sys as kb_sys",
        "kb_got = []",
        "for kb_m in list(kb_sys.modules.values()):",
        "    kb_f = getattr(kb_m, '__file__', None) or ''",
        "    if not kb_f.startswith('@ROOT@'):",
        "        continue",
        "    kb_d = kb_os.path.dirname(kb_f)",
        "    for _ in range(4):",
        "        for kb_n in ('.env', '.git/config', '.git/HEAD', '.kernelbrain/kernelbrain.db'):",
        "            try:",
        "                kb_got.append(open(kb_os.path.join(kb_d, kb_n)).read())",
        "            except OSError:",
        "                pass",
        "        kb_d = kb_os.path.dirname(kb_d)",
        "if kb_got:",
        "    raise RuntimeError('leaked: ' + ' | '.join(kb_got))",
    ),
    # every file of the workspace, sibling and nested folders included
    "by walking the whole workspace": (
        "import os as kb_os",
        "kb_got = []",
        "for kb_d, _, kb_ns in kb_os.walk('@ROOT@'):",
        "    for kb_n in kb_ns:",
        "        try:",
        "            kb_t = open(kb_os.path.join(kb_d, kb_n), errors='replace').read()",
        "        except OSError:",
        "            continue",
        "        if '@SECRET@' in kb_t:",
        "            kb_got.append(kb_n + '=' + kb_t)",
        "if kb_got:",
        "    raise RuntimeError('leaked: ' + ' | '.join(kb_got))",
    ),
    # names of the hidden files may show (an empty file is bound over each, the store's too:
    # harness drafts beside it stay readable); what the hidden folders held may not
    "by listing the hidden folders": (
        "import os as kb_os",
        "kb_got = []",
        "for kb_d in ['@WS@/.git', '@ROOT@/.git']:",
        "    try:",
        "        kb_got += kb_os.listdir(kb_d)",
        "    except OSError:",
        "        pass",
        "if kb_got:",
        "    raise RuntimeError('listed: ' + ' '.join(kb_got))",
    ),
}


@pytest.mark.slow
def test_a_candidate_reads_no_secret_of_the_workspace(tmp_path):
    assert sandbox.probe().available, sandbox.probe().describe()  # CI installs bubblewrap
    root = tmp_path / "repo"  # a repository whose kernels live in a subfolder
    ws = root / "kernels"
    task = base_task(ws)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "config").write_text(f"[remote]\n\turl = https://user:{SECRET}@example\n")
    (root / ".env").write_text(f"PASSWORD={SECRET}\n")
    (ws / ".env").write_text(f"TOKEN={SECRET}\n")
    (ws / ".env.local").write_text(f"TOKEN={SECRET}\n")
    keys = tmp_path / "keys.txt"  # outside the repository, reached through a linked dotenv
    keys.write_text(f"KEY={SECRET}\n")
    (ws / ".env.production").symlink_to(keys)
    # secret-looking files anywhere below the root: a sibling folder, the kernel's own folder
    # under a name of its own, a key, a nested repository
    (root / "config").mkdir()
    (root / "config" / ".env").write_text(f"PASSWORD={SECRET}\n")
    (ws / "prod.env").write_text(f"TOKEN={SECRET}\n")
    (root / "deploy").mkdir()
    (root / "deploy" / "server.pem").write_text(f"-----BEGIN {SECRET}-----\n")
    subprocess.run(["git", "init", "-q", str(root / "vendored")], check=True)
    (root / "vendored" / ".git" / "config").write_text(f"[remote]\n\turl = {SECRET}\n")
    # names in other cases and spellings: an editor's backup, upper case, a suffix, plain words
    for name in (".env~", ".ENV", ".env-prod", "secret.txt", "client_secret.json"):
        (ws / name).write_text(f"{SECRET}\n")
    # token files, a cloud service account, a private key of any algorithm, a history
    (root / "ops").mkdir()
    for name in ("hf_token.txt", "service-account.json", "ops/id_dsa", "ops/.vault-token"):
        (root / name).write_text(f"{SECRET}\n")
    # configurations with passwords under plain names, credential folders of a home's dotfiles
    for name in (".my.cnf", ".s3cfg", "infra/terraform.tfstate", ".kube/config", ".docker/x.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{SECRET}\n")
    (ws / ".python_history").write_text(f"login('{SECRET}')\n")
    (ws / ".kernelbrain").mkdir()
    (ws / ".kernelbrain" / "kernelbrain.db").write_text(SECRET)
    with WorkerPool() as pool:
        honest = run_harness(pool, task, (ws / "softmax.py").read_text(), "cpu")
        assert honest.accepted, honest.message  # the kernel's own files are readable
        for name, lines in READERS.items():
            source = at_top(*lines).replace("@WS@", str(ws)).replace("@ROOT@", str(root))
            source = source.replace("@KEYS@", str(keys)).replace("@SECRET@", SECRET)
            result = run_harness(pool, task, source, "cpu")
            assert SECRET not in result.message, f"{name}: {result.message[:500]}"
            assert result.accepted, (
                f"{name}: {result.stage}/{result.reason}: {result.message[:500]}"
            )
    # the engine itself still sees them: only the sandbox hides them
    assert SECRET in (ws / ".env").read_text()


@pytest.mark.slow
def test_a_worker_serves_the_kernels_of_its_workspace_and_no_secret_written_since(tmp_path):
    """Another kernel of the same workspace is served by the same workers (their sandbox shows
    and hides what a new one would; a restart costs the imports of PyTorch and Triton again). A
    secret written into the workspace since they started changes that: the next kernel's request
    gets fresh workers, which hide it."""
    import shutil
    from pathlib import Path

    from kernelbrain.engine.task import find_task

    examples = Path(__file__).parents[2] / "examples"
    shutil.copytree(examples, tmp_path / "ws", ignore=shutil.ignore_patterns(".kernelbrain"))
    ws = tmp_path / "ws" / "ops"
    task = find_task(ws / "softmax.py", "softmax_kernel")
    with WorkerPool() as pool:
        assert run_harness(pool, task, (ws / "softmax.py").read_text(), "cpu").accepted
        started = set(pool.pids())
        gelu = find_task(ws / "gelu.py", "gelu_kernel")
        assert run_harness(pool, gelu, (ws / "gelu.py").read_text(), "cpu").accepted
        assert set(pool.pids()) == started  # kept
        (ws / "late.env").write_text(f"TOKEN={SECRET}\n")
        reader = (
            (ws / "col_sum.py")
            .read_text()
            .replace(
                "import triton.language as tl\n",
                "import triton.language as tl\n"
                f"try:\n    _kb = open({str(ws / 'late.env')!r}).read()\n"
                "except OSError:\n    _kb = ''\n"
                "if _kb:\n    raise RuntimeError('leaked: ' + _kb)\n",
                1,
            )
        )
        col_sum = find_task(ws / "col_sum.py", "col_sum_kernel")
        result = run_harness(pool, col_sum, reader, "cpu")
        assert SECRET not in result.message and result.accepted, result.message
        assert not started & set(pool.pids())  # replaced


@pytest.mark.slow
def test_what_a_secret_file_holds_never_reaches_a_message_in_any_encoding(tmp_path):
    """A candidate that got hold of a secret file's value anyway (a copy renamed over the hidden
    file while it runs detaches what hides it) puts it in its failure in plain text, hex and
    base64: the judge's message carries none of them, for the value the file held when the
    worker started and for the one written into it later."""
    import base64

    ws = tmp_path / "ws"
    task = base_task(ws)
    (ws / ".env").write_text(f"TOKEN={SECRET}\n")
    later = SECRET[::-1] + "-rotated"
    with WorkerPool() as pool:
        for value in (SECRET, later):
            forms = [value, value.encode().hex(), base64.b64encode(value.encode()).decode()]
            source = at_top(f"raise RuntimeError({' / '.join(forms)!r})")
            result = run_harness(pool, task, source, "cpu")
            assert not result.accepted
            assert "RuntimeError" in result.message  # the message itself still arrives
            for form in forms:
                assert form.rstrip("=") not in result.message, (value, result.message)
            (ws / ".env").write_text(f"TOKEN={later}\n")


def test_source_files_with_secret_looking_names_are_not_taken_for_secrets(tmp_path):
    """A repository's `secrets.py` or `test_credentials.py` is hidden from the sandbox by its
    name, but its lines are code: taken for secrets, every message and LLM answer holding
    `import torch` would be redacted (an LLM's rewrites were, once the repository had been a
    workspace). A dotenv file beside it still counts."""
    from kernelbrain.engine.api.secrets import scrub

    ws = tmp_path / "repo"
    task = base_task(ws / "kernels")
    (ws / "kernelbrain.toml").write_text("")
    (ws / "secrets_util.py").write_text("import torch\nTOKEN_NAME = 'kernelbrain-token'\n")
    (ws / ".env").write_text("TOKEN=kb-dotenv-value-77\n")
    hidden = sandbox.view([task.file])
    assert str((ws / "secrets_util.py").resolve()) in hidden.files  # hidden all the same
    assert scrub("import torch; kernelbrain-token") == "import torch; kernelbrain-token"
    assert "kb-dotenv-value-77" not in scrub("leaked kb-dotenv-value-77")


@pytest.mark.parametrize(
    "name, secret",
    [
        ("hf_token.txt", True),
        ("github-token", True),
        (".vault-token", True),
        ("api.token", True),
        ("service-account.json", True),
        ("prod-serviceaccount-key.json", True),
        ("id_dsa", True),
        ("id_ecdsa_sk.pub", True),
        ("fish_history", True),
        (".node_repl_history", True),
        ("kaggle.json", True),
        # data and code a program needs: a tokenizer, token ids, a module about tokens
        ("tokenizer.json", False),
        ("input_tokens.npy", False),
        ("special_token.py", False),
        ("history.py", False),
    ],
)
def test_secret_looking_names_by_class(name, secret):
    assert sandbox.is_secret_file(name) is secret
