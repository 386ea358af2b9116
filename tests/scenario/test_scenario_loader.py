"""Scenario validation: every error names file, line, field path and what is allowed, all errors at once."""
from __future__ import annotations

import textwrap

import pytest

from opsim.errors import ScenarioError
from opsim.scenario import config as C
from opsim.scenario.loader import apply_overrides, load_scenario, parse_key, parse_override

GOOD = """\
name: t
seed: 1
events: [e]
threads:
  - name: a
    streams: [s0, s1]
    program:
      - loop:
          count: 3
          body:
            - op: Add
              shape: [4, 8]
              dtype: float16
            - record_event: {event: e, stream: s0}
            - wait_event: {event: e, stream: s1}
            - op: Matmul
              stream: s1
              shapes: {self: [4, 8], mat2: [8, 2]}
      - sync: s1
"""


def write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def error_of(tmp_path, text, **kw):
    p = write(tmp_path, text)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(p, **kw)
    return str(exc.value), str(p)


def test_good_scenario_builds_the_typed_config(tmp_path):
    cfg = load_scenario(write(tmp_path, GOOD))
    assert cfg.name == "t" and cfg.seed == 1 and cfg.events == ("e",)
    th = cfg.threads[0]
    assert th.streams == ("s0", "s1")
    loop = th.program[0]
    assert isinstance(loop, C.LoopStep) and loop.count == 3
    add, rec, wait, mm = loop.body
    assert add.spec.api == "aclnnAdd" and add.shape_sets == (((4, 8), (4, 8)),) and add.dtypes == ("float16",)
    assert add.stream == "s0" and add.attrs == {"alpha": 1.0}
    assert isinstance(rec, C.EventStep) and rec.record and not wait.record
    assert mm.shape_sets == (((4, 8), (8, 2)),) and mm.dtypes == ("float",)
    assert isinstance(th.program[1], C.SyncStep)
    assert cfg.planned_calls() == 6
    assert cfg.epoch_us == 1_700_000_000_000_000


def test_typo_in_a_field(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("seed: 1", "sed: 1"))
    assert msg.startswith(f"{path}:2: sed: unknown field 'sed' (did you mean 'seed'?)")
    assert "allowed fields:" in msg and "\n" not in msg


def test_wrong_type(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("count: 3", "count: three"))
    assert msg == f"{path}:9: threads[0].program[0].loop.count: expected an integer, got str 'three'"


def test_unknown_op(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("op: Add", "op: Addd"))
    assert msg.startswith(f"{path}:11: threads[0].program[0].loop.body[0].op: unknown op 'Addd' "
                          "(did you mean 'Add'?); known ops:")


def test_negative_dimension(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("shape: [4, 8]", "shape: [4, -8]"))
    assert msg == (f"{path}:12: threads[0].program[0].loop.body[0].shape[1]: negative dimension -8; every "
                   "dimension must be >= 0")


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_yaml_syntax_error(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("shape: [4, 8]", "shape: [4, 8"))
    assert msg.startswith(f"{path}:13:") and "YAML syntax error" in msg


def test_python_tag_is_rejected_without_constructing_anything(tmp_path):
    text = GOOD.replace("seed: 1", "seed: !!python/object/apply:os.system ['echo pwned > pwned.txt']")
    msg, path = error_of(tmp_path, text)
    assert msg.startswith(f"{path}:2: seed: the tag !!python/object/apply:os.system is not allowed")
    assert "direct_invoke_module" in msg
    assert not (tmp_path / "pwned.txt").exists()


def test_custom_tag_is_rejected(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("name: t", "name: !secret t"))
    assert msg.startswith(f"{path}:1: name: the tag !secret is not allowed")


def test_duplicate_key(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("seed: 1", "seed: 1\nseed: 2"))
    assert msg == f"{path}:3: seed: duplicate key 'seed' (each field once)"


def test_all_errors_are_reported_at_once_in_line_order(tmp_path):
    text = GOOD.replace("seed: 1", "seed: -1").replace("op: Add", "op: Nope").replace("stream: s1\n", "stream: s9\n")
    text = text.replace("dtype: float16", "dtype: float16\n              colour: red")
    msg, path = error_of(tmp_path, text)
    lines = msg.splitlines()
    assert lines[0] == f"{path}: 4 errors in the scenario:"
    assert lines[1].startswith(f"  {path}:2: seed: -1 is out of range")
    assert "unknown op 'Nope'" in lines[2] and "colour" in lines[3] and "unknown stream 's9'" in lines[4]


def test_catalogue_checks(tmp_path):
    bad = GOOD.replace("shapes: {self: [4, 8], mat2: [8, 2]}", "shapes: {self: [4, 8], mat2: [7, 2]}")
    msg, _ = error_of(tmp_path, bad)
    assert "Matmul: inner dimensions differ: [4, 8] @ [7, 2] (8 != 7)" in msg
    msg, _ = error_of(tmp_path, GOOD.replace("dtype: float16", "dtype: int8"))
    assert "Add does not take dtype 'int8'; supported: float, float16, bf16, int32, int64" in msg
    msg, _ = error_of(tmp_path, GOOD.replace("shapes: {self: [4, 8], mat2: [8, 2]}", "shapes: [[4, 8]]"))
    assert "Matmul takes 2 input shape(s) (self, mat2), got 1" in msg
    msg, _ = error_of(tmp_path, GOOD.replace("event: e, stream: s1", "event: f, stream: s1"))
    assert "unknown event 'f'" in msg
    msg, _ = error_of(tmp_path, GOOD.replace("dtype: float16", "dtype: float16\n              attrs: {alpah: 2}"))
    assert "Add has no attribute 'alpah' (did you mean 'alpha'?)" in msg
    msg, _ = error_of(tmp_path, GOOD.replace("shape: [4, 8]", "shape: [4, 8]\n              shapes: [[4, 8], [4, 8]]"))
    assert "give exactly one of shape" in msg


def test_step_needs_a_known_key(tmp_path):
    msg, path = error_of(tmp_path, GOOD.replace("- sync: s1", "- synk: s1"))
    assert "a program step needs one of the keys op, loop, choose" in msg and "(did you mean 'sync'?)" in msg


def test_unknown_env_variable_and_soc(tmp_path):
    msg, _ = error_of(tmp_path, GOOD.replace("seed: 1", "seed: 1\nenv: {ACLNN_CACHE_LIMT: '5'}\nsoc: Ascend999"))
    assert "unknown field 'ACLNN_CACHE_LIMT' (did you mean 'ACLNN_CACHE_LIMIT'?)" in msg
    assert "'Ascend999' is not allowed" in msg and "Ascend910B2" in msg


def test_top_level_must_be_a_mapping(tmp_path):
    msg, path = error_of(tmp_path, "- 1\n- 2\n")
    assert msg.startswith(f"{path}:1: the scenario must be a mapping")
    with pytest.raises(ScenarioError, match="empty"):
        load_scenario(write(tmp_path, "# nothing\n"))


def test_overrides(tmp_path):
    p = write(tmp_path, GOOD)
    cfg = load_scenario(p, {"seed": 9, "threads.0.program.0.loop.count": 5, "env.GE_PROFILING_TO_STD_OUT": 1})
    assert cfg.seed == 9 and cfg.threads[0].program[0].count == 5 and cfg.env == {"GE_PROFILING_TO_STD_OUT": "1"}
    with pytest.raises(ScenarioError, match=r"\(--set\): threads\[0\].program\[0\].loop.count: expected an integer"):
        load_scenario(p, {"threads[0].program[0].loop.count": "x"})
    with pytest.raises(ScenarioError, match="does not exist"):
        load_scenario(p, {"threads.5.name": "x"})
    assert parse_key("threads[0].program.1.op") == ("threads", 0, "program", 1, "op")
    assert parse_override("a.b=[1, 2]") == ("a.b", [1, 2])
    with pytest.raises(ScenarioError, match="expected key=value"):
        parse_override("seed")


def test_dict_source_is_not_modified():
    data = {"name": "d", "threads": [{"name": "a", "program": [{"op": "Relu", "shape": [3]}]}]}
    cfg = load_scenario(data, {"seed": 4})
    assert cfg.seed == 4 and "seed" not in data
    assert cfg.threads[0].streams == ("default",)
    d = {"x": 1}
    apply_overrides(d, {"y.z": 2})
    assert d == {"x": 1, "y": {"z": 2}}


def test_direct_invoke_module_is_the_only_user_code(tmp_path, monkeypatch):
    mod = tmp_path / "my_producers.py"
    mod.write_text(textwrap.dedent("""
        from opsim.ops import fused
        DIRECT_INVOKE_OPS = {"MyBiasRelu": dict(fused.DIRECT_INVOKE_OPS["FusedBiasRelu"], api="aclnnFusedBiasRelu")}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    text = """\
    name: di
    direct_invoke_module: my_producers
    threads:
      - name: a
        program:
          - {op: MyBiasRelu, shapes: [[4, 8], [8]], dtype: float}
    """
    cfg = load_scenario(write(tmp_path, text))
    step = cfg.threads[0].program[0]
    assert step.spec.name == "MyBiasRelu" and step.spec.launchers == ("DIRECT_INVOKE",)
    msg, _ = error_of(tmp_path, text.replace("my_producers", "no_such_module_here"))
    assert "direct_invoke_module: cannot import 'no_such_module_here'" in msg


def test_repeated_steps_are_validated_once_and_errors_keep_their_paths(tmp_path):
    from opsim.scenario import schema
    step = {"op": "Add", "shape": [4, 8], "dtype": "float16"}
    doc = {"name": "memo", "threads": [{"name": "t", "program": [dict(step) for _ in range(50)]}]}
    assert list(schema.validator().iter_errors(doc)) == []
    key = schema.json.dumps(step, sort_keys=True, allow_nan=False)
    assert key in schema._VALID_STEPS  # the one distinct step was memoised as valid
    # the same valid step stays valid; a broken copy further on is still reported, with its own path
    bad = dict(step, shape=[4, "eight"])
    doc["threads"][0]["program"].append(bad)
    errors = list(schema.validator().iter_errors(doc))
    assert [tuple(e.absolute_path) for e in errors] == [("threads", 0, "program", 50, "shape", 1)]
    assert schema.json.dumps(bad, sort_keys=True) not in schema._VALID_STEPS


REPEATED = """\
name: t
threads:
  - name: a
    streams: [s0, s1]
    program:
      - op: Add
        shape: [4, 8]
        attrs: {alpha: 2}
      - op: Add
        shape: [4, 8]
        attrs: {alpha: 2}
      - op: Add
        shape: [4, 8]
        attrs: {alpha: 2.0}
      - {op: Add, stream: s1, shape: [4, 8], attrs: {alpha: 2}}
  - name: b
    streams: [s1]
    program:
      - op: Add
        shape: [4, 8]
        attrs: {alpha: 2}
"""


def test_a_repeated_op_step_is_built_like_the_first_with_its_own_place(tmp_path):
    """Steps written alike share their checked values; each keeps its own line, its own attrs dict, and a
    value of another type (2 and 2.0) or another thread's streams is not taken for the same step."""
    cfg = load_scenario(write(tmp_path, REPEATED))
    a, b = cfg.threads
    s = a.program
    assert [x.where.rsplit("/", 1)[-1] for x in s] == ["s.yaml:6", "s.yaml:9", "s.yaml:12", "s.yaml:15"]
    assert s[0] == C.OpStep(**{**s[1].__dict__, "where": s[0].where})
    assert s[1].shape_sets is s[0].shape_sets and s[2].shape_sets is not s[0].shape_sets  # checked once
    assert s[0].attrs == s[1].attrs and s[0].attrs is not s[1].attrs
    assert type(s[0].attrs["alpha"]) is int and type(s[2].attrs["alpha"]) is float
    assert [x.stream for x in s] == ["s0", "s0", "s0", "s1"]
    assert b.program[0].stream == "s1"  # the same text on another thread: its own first stream


def test_a_repeated_bad_op_step_is_reported_at_every_place(tmp_path):
    text = REPEATED.replace("shape: [4, 8]\n        attrs: {alpha: 2}", "shape: [4, 8]\n        attrs: {beta: 2}")
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, text))
    msg = str(e.value)
    assert "3 errors" in msg and "s.yaml:8:" in msg and "s.yaml:11:" in msg and "s.yaml:21:" in msg


def test_a_step_fine_on_one_thread_is_checked_again_on_a_pta_thread(tmp_path):
    text = """\
    name: t
    threads:
      - name: a
        program:
          - {op: Add, shape: [4, 8], repeat: 2}
      - name: b
        cache_mode: pta
        program:
          - {op: Add, shape: [4, 8], repeat: 2}
    """
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, text))
    assert "repeat > 1 needs cache_mode: ordinary" in str(e.value) and "s.yaml:9:" in str(e.value)
