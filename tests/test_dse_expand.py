"""Expanding specs into points: product order, zip groups, exclusions, templates and stable ids."""

from coreplane.dse import expand
from coreplane.dse.spec import from_dict


def spec(**kw):
    return from_dict({"command": "run {a} {b} {c}", **kw})


def test_product_in_declaration_order():
    s = spec(parameters={"a": [1, 2], "b": ["x", "y"], "c": [True]})
    assert expand.combinations(s) == [
        {"a": 1, "b": "x", "c": True}, {"a": 1, "b": "y", "c": True},
        {"a": 2, "b": "x", "c": True}, {"a": 2, "b": "y", "c": True}]


def test_zip_moves_parameters_together_and_excludes_drop_matches():
    s = spec(parameters={"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [0, 1]},
             expand={"zip": [["a", "b"]], "exclude": [{"a": 2, "c": 1}, {"b": ["z"]}]})
    assert expand.combinations(s) == [
        {"a": 1, "b": "x", "c": 0}, {"a": 1, "b": "x", "c": 1}, {"a": 2, "b": "y", "c": 0}]


def test_points_fill_parameters_and_keep_builtins():
    s = from_dict({"command": "awk '{{print $1}}' {rundir}/in.{size:05d} > {rundir}/out; echo {rep}",
                   "parameters": {"size": [64]}, "env": {"SIZE": "{size}", "DIR": "{rundir}"}})
    (p,) = expand.points(s)
    assert p.command == "awk '{print $1}' {rundir}/in.00064 > {rundir}/out; echo {rep}"
    assert p.env == {"SIZE": "64", "DIR": "{rundir}"}
    run = expand.fill_builtins(p.command, {"rundir": "/r", "rep": 3})
    assert run == "awk '{print $1}' /r/in.00064 > /r/out; echo 3"


def test_point_ids_are_stable_and_change_with_the_command():
    a = expand.points(spec(parameters={"a": [1, 2], "b": [0], "c": [0]}))
    again = expand.points(spec(parameters={"a": [1, 2], "b": [0], "c": [0]}))
    other = expand.points(from_dict({"command": "run2 {a} {b} {c}", "parameters": {"a": [1, 2], "b": [0], "c": [0]}}))
    assert [p.point_id for p in a] == [p.point_id for p in again]
    assert len({p.point_id for p in a}) == 2
    assert not {p.point_id for p in a} & {p.point_id for p in other}
