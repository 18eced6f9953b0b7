"""The Go template engine (kvdoctor/scan/gotemplate): each construct as Go's text/template with Helm's options
executes it, Go's printing and truthiness, trim markers, and the errors Helm would raise."""

from __future__ import annotations

import pytest

from kvdoctor.scan.gotemplate import ParseError, Renderer, TemplateError


def render(text: str, values=None, **top) -> str:
    renderer = Renderer()
    renderer.add("t", text)
    return renderer.render("t", {"Values": values or {}, **top}).text()


def test_trim_markers_remove_whitespace_and_newlines_on_their_side_only():
    assert render("a  {{- 1 }}  b") == "a1  b"
    assert render("a  {{ 1 -}}  \n b") == "a  1b"
    assert render("x\n  {{- if true }}\n  y\n  {{- end }}\n") == "x\n  y\n"
    assert render("{{-3}}") == "-3"  # no space after the dash: a negative number, not a trim marker


def test_comments_print_nothing_and_may_trim():
    assert render("a {{/* note {{ x }} */}} b") == "a  b"
    assert render("a {{- /* note */ -}} b") == "ab"


def test_go_prints_nil_as_no_value_maps_and_lists_in_its_own_syntax():
    values = {"m": {"b": 1.0, "a": [1, None]}, "big": 1000000.0, "n": 8192.0, "f": 0.95, "t": True}
    assert render("{{ .Values.missing }}", values) == "<no value>"
    assert render("{{ .Values.m }}", values) == "map[a:[1 <nil>] b:1]"
    assert render("{{ .Values.big }} {{ .Values.n }} {{ .Values.f }} {{ .Values.t }}", values) == "1e+06 8192 0.95 true"
    assert render('{{ print 1 2 "a" 3 }}') == "1 2a3"  # Sprint: a space only between two non-strings


def test_truthiness_follows_go():
    values = {"zero": 0.0, "empty": "", "list": [], "map": {}, "no": False, "s": "x", "one": [0]}
    for name in ("zero", "empty", "list", "map", "no", "missing"):
        assert render(f"{{{{ if .Values.{name} }}}}T{{{{ else }}}}F{{{{ end }}}}", values) == "F", name
    for name in ("s", "one"):
        assert render(f"{{{{ if .Values.{name} }}}}T{{{{ else }}}}F{{{{ end }}}}", values) == "T", name


def test_if_else_if_with_and_range_over_lists_maps_and_ints():
    values = {"a": "", "b": "B", "l": ["x", "y"], "m": {"z": 1, "a": 2}}
    assert render("{{ if .Values.a }}1{{ else if .Values.b }}2{{ else }}3{{ end }}", values) == "2"
    assert render("{{ with .Values.b }}{{ . }}{{ else }}none{{ end }}", values) == "B"
    assert render("{{ with .Values.a }}{{ . }}{{ else }}none{{ end }}", values) == "none"
    assert render("{{ range $i, $v := .Values.l }}{{ $i }}={{ $v }},{{ end }}", values) == "0=x,1=y,"
    assert render("{{ range $k, $v := .Values.m }}{{ $k }}{{ $v }}{{ end }}", values) == "a2z1"  # keys sorted
    assert render("{{ range .Values.none }}x{{ else }}empty{{ end }}", values) == "empty"
    assert render("{{ range 3 }}{{ . }}{{ end }}") == "012"
    assert render("{{ range .Values.l }}{{ if eq . \"y\" }}{{ break }}{{ end }}{{ . }}{{ end }}", values) == "x"


def test_variables_declare_assign_and_dollar_is_the_top():
    assert render('{{ $x := "a" }}{{ if true }}{{ $x = "b" }}{{ end }}{{ $x }}') == "b"
    assert render("{{ range .Values.l }}{{ $.Values.p }}{{ . }}{{ end }}", {"l": [1, 2], "p": "-"}) == "-1-2"
    assert render('{{ $m := dict "k" "v" }}{{ $m.k }}') == "v"


def test_define_include_template_and_tpl():
    text = ('{{- define "name" -}}{{ .Values.n | default "d" }}{{- end -}}'
            '[{{ include "name" . }}][{{ template "name" . }}]')
    assert render(text, {"n": "x"}) == "[x][x]"
    assert render('{{ tpl "{{ .Values.a }}-{{ .Values.b }}" . }}', {"a": 1.0, "b": "z"}) == "1-z"
    assert render('{{ include "name" . | upper | quote }}{{ define "name" }}ab{{ end }}') == '"AB"'


def test_parenthesised_pipelines_and_field_chains():
    assert render('{{ (dict "a" (dict "b" "c")).a.b }}') == "c"
    assert render('{{ printf "%s-%s" .Release.Name "x" | trunc 5 }}', Release={"Name": "release"}) == "relea"
    assert render("{{ and 1 0 }} {{ or 0 \"\" 3 }} {{ not 0 }}") == "0 3 true"


def test_sprig_functions_as_charts_use_them():
    values = {"args": ["--dtype", "half"], "port": 8000.0, "res": {"limits": {"nvidia.com/gpu": 1.0}}}
    assert render('{{ range .Values.args }}{{ quote . }},{{ end }}', values) == '"--dtype","half",'
    assert render("{{ toYaml .Values.res | nindent 2 }}", values) == "\n  limits:\n    nvidia.com/gpu: 1"
    assert render('{{ .Values.port | int | add 1 }} {{ div 7 2 }} {{ sub 1 3 }} {{ mul 2 3 }}', values) == "8001 3 -2 6"
    assert render('{{ default "a" .Values.none }} {{ coalesce "" .Values.none "c" }} {{ ternary "y" "n" true }}') == \
        "a c y"  # fmt: skip
    assert render('{{ "a-b-c" | replace "-" "_" | title }} {{ join "," (list 1 "b") }} {{ splitList "," "x,y" }}') == \
        "A_b_c 1,b [x y]"  # fmt: skip
    assert render('{{ hasKey (dict "a" 1) "a" }} {{ contains "ll" "vllm" }} {{ hasPrefix "v" "vllm" }}') == \
        "true true true"  # fmt: skip
    assert render('{{ trimSuffix "-" "name-" }} {{ trunc 3 "abcdef" }} {{ squote "x" }} {{ b64enc "vllm" }}') == \
        "name abc 'x' dmxsbQ=="  # fmt: skip
    assert render('{{ semverCompare ">=1.21-0" "v1.31.0" }} {{ semverCompare "<1.19" "1.31.0" }}') == "true false"
    assert render('{{ regexReplaceAll "([a-z]+)-(\\\\d+)" "vllm-42" "${2}:$1" }}') == "42:vllm"
    assert render('{{ $d := dict "a" (dict "x" 1) }}{{ $_ := merge $d (dict "a" (dict "y" 2)) }}{{ toJson $d }}') == \
        '{"a":{"x":1,"y":2}}'  # fmt: skip
    assert render('{{ printf "%d %s %v %q" 3 "s" (list 1) "q" }}') == '3 s [1] "q"'
    assert render('{{ printf "%d" .Values.port }}', values) == "%!d(float64=8000)"  # Go's own output, as Helm's
    assert render("{{ until 3 }} {{ first (list 1 2) }} {{ last (list 1 2) }} {{ keys (dict \"k\" 1) }}") == \
        "[0 1 2] 1 2 [k]"  # fmt: skip
    assert render('{{ (fromYaml "a: 1").a }} {{ sha256sum "x" | trunc 8 }}') == "1 2d711642"


def test_helm_errors_stop_the_template():
    with pytest.raises(TemplateError, match="nil pointer evaluating interface {}.b"):
        render("{{ .Values.a.b }}")
    with pytest.raises(TemplateError, match="must set model"):
        render('{{ required "must set model" .Values.model }}')
    with pytest.raises(TemplateError, match="stop here"):
        render('{{ fail "stop here" }}')
    with pytest.raises(TemplateError, match="incompatible types for comparison"):
        render("{{ eq .Values.n 1 }}", {"n": 1.0})  # values are float64 in Helm, a literal 1 an int


def test_an_unknown_function_is_named_and_its_line_kept():
    with pytest.raises(TemplateError) as raised:
        render("a: 1\nb: {{ nosuchfunc 1 }}\n")
    assert raised.value.unknown == "function nosuchfunc" and raised.value.line == 2


def test_malformed_templates_are_parse_errors_with_their_line():
    with pytest.raises(ParseError, match="line 1: unexpected EOF"):
        render("{{ if true }}never closed")
    with pytest.raises(ParseError, match="unexpected {{end}}"):
        render("a\n{{ end }}")
    with pytest.raises(ParseError, match="unclosed action"):
        render("{{ .Values.x ")


def test_each_output_line_keeps_the_template_line_that_wrote_it():
    renderer = Renderer()
    renderer.add("t", "a: 1\n{{- range .Values.l }}\n- {{ . }}\n{{- end }}\nb: {{ toYaml .Values.m | nindent 2 }}\n")
    output = renderer.render("t", {"Values": {"l": ["x", "y"], "m": {"k": 1, "j": 2}}})
    assert output.text() == "a: 1\n- x\n- y\nb: \n  j: 2\n  k: 1\n"
    assert [line for _, line in output.line_origins()] == [1, 3, 3, 5, 5, 5]


def test_block_continue_literals_and_else_with():
    assert render('{{ block "b" . }}default {{ .Values.x }}{{ end }}', {"x": 1.0}) == "default 1"
    assert render("{{ range .Values.l }}{{ if eq . 2.0 }}{{ continue }}{{ end }}{{ . }}{{ end }}", {"l": [1.0, 2.0, 3.0]}) \
        == "13"  # fmt: skip
    assert render("{{ 'a' }} {{ `raw\\n` }} {{ 0x1F }} {{ 1.5e3 }} {{ \"tab\\there\" }}") == "97 raw\\n 31 1500 tab\there"
    assert render("{{ with .Values.a }}a{{ else with .Values.b }}{{ . }}{{ end }}", {"b": "B"}) == "B"
    assert render("{{ $v := .Values }}{{ $v.m.k }}", {"m": {"k": "deep"}}) == "deep"


def test_a_struct_field_that_does_not_exist_is_an_error_but_a_missing_map_key_is_not():
    from kvdoctor.scan.gotemplate.values import GoObject

    chart = GoObject("*chart.Metadata", {"Name": "nm-vllm"})
    assert render("{{ .Chart.Name }}{{ .Values.nothing }}", Chart=chart) == "nm-vllm<no value>"
    with pytest.raises(TemplateError, match="can't evaluate field name in type \\*chart.Metadata"):
        render("{{ .Chart.name }}", Chart=chart)


def test_dates_paths_and_json_variants_render_and_helms_removed_env_stays_unknown():
    assert render('{{ now | date "2006-01-02T15:04:05Z07:00" }} {{ date "Jan 2 3:04PM" now }}') == \
        "2026-01-01T00:00:00Z Jan 1 12:00AM"  # fmt: skip  # a fixed render time: the scan's output is repeatable
    assert render('{{ base "/models/qwen/config.json" }} {{ dir "/a/b" }} {{ ext "m.gguf" }}') == "config.json /a .gguf"
    assert render('{{ toRawJson (dict "a" "<b>") }} {{ (fromJsonArray "[1, 2]") | len }}') == '{"a":"<b>"} 2'
    with pytest.raises(TemplateError) as raised:
        render('{{ env "HOME" }}')  # Helm removes Sprig's env and expandenv
    assert raised.value.unknown == "function env"


def test_sprig_version_and_membership_functions_charts_call_in_their_helpers():
    # castai's webhook helpers (splitn), redhat-ai-services' validators (mustHas), a Kafka chart's minor version (semver)
    assert render('{{ $p := splitn ":" 2 "image:tag:x" }}{{ $p._0 }} {{ $p._1 }}') == "image tag:x"
    assert render("{{ mustHas .Values.mode (list \"a\" \"b\") }}", {"mode": "b"}) == "true"
    assert render("{{ mustHas .Values.mode (list \"a\" \"b\") }}", {"mode": "c"}) == "false"
    assert render('{{ $v := semver "3.7.1-rc1" }}{{ printf "%d.%d" $v.Major $v.Minor }} {{ $v.Prerelease }}') == "3.7 rc1"
    with pytest.raises(TemplateError):
        render('{{ semver "not-a-version" }}')


def test_a_nil_in_parentheses_or_a_variable_has_nil_fields_as_helms_nil_safe_idiom():
    # neuralmagic's nm-vllm-grafana-dashboards: `(((.Values.grafana).sidecar).dashboards).label` with no grafana key
    assert render("{{ if (((.Values.grafana).sidecar).dashboards).label }}x{{ else }}none{{ end }}") == "none"
    assert render("{{ $g := .Values.grafana }}{{ $g.sidecar }}") == "<no value>"
    with pytest.raises(TemplateError, match="nil pointer evaluating interface {}.sidecar"):
        render("{{ .Values.grafana.sidecar.label }}")  # one chain: the missing key is a nil pointer, as in Helm
