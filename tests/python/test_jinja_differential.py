"""The chat-template engine against Python's jinja2 on random templates,
rendered by `tokenmill template` and by jinja2 with Hugging Face's settings
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols):
whitespace control (text, {{ }}, {# #}, if/else, for, set and raw tags with
every -, + and plain delimiter) and scoping (set inside loops and ifs,
namespaces, macros with defaults, caller, loop variables, break). The two
must give the same bytes, or both reject the template. The seeds are fixed,
so a failure reproduces."""
import json
import random
import subprocess

from conftest import require_module

jinja2_sandbox = require_module("jinja2.sandbox", "jinja2", "the reference renderer of chat templates")

TEXTS = ["", " ", "  ", "\n", " \n", "\n  ", "a", " a ", "\t", "\n\n", "b\n ", "\r\n"]


def random_template(rng, depth=0):
    def tag(body):
        return rng.choice(["{%", "{%-", "{%+"]) + " " + body + " " + rng.choice(["%}", "-%}", "+%}"])

    out = ""
    for _ in range(rng.randint(1, 5)):
        out += rng.choice(TEXTS)
        r = rng.random()
        if r < 0.2:
            out += rng.choice(["{{", "{{-", "{{+"]) + ' "v" ' + rng.choice(["}}", "-}}"])
        elif r < 0.35:
            out += rng.choice(["{#", "{#-", "{#+"]) + " c " + rng.choice(["#}", "-#}", "+#}"])
        elif r < 0.5 and depth < 3:
            other = rng.choice(["", tag("else") + random_template(rng, depth + 1)])
            out += tag("if true") + random_template(rng, depth + 1) + other + tag("endif")
        elif r < 0.6 and depth < 3:
            out += tag("for x in [1, 2]") + random_template(rng, depth + 1) + tag("endfor")
        elif r < 0.65:
            out += tag("raw") + rng.choice(TEXTS) + "{{ x }}" + rng.choice(TEXTS) + tag("endraw")
        elif r < 0.7:
            out += tag("set y = 1")
    return out + rng.choice(TEXTS)


def random_statements(rng, depth=0):
    values = ["1", "'s'", "x", "ns.v", "loop.index", "loop.first", "m.role", "messages|length", "[1, 2]", "none",
              "i", "y", "caller is defined", "kwargs"]
    out = ""
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        v = rng.choice(values)
        if r < 0.25:
            out += "{{ " + v + " }}"
        elif r < 0.35:
            out += "{% set x = " + v + " %}"
        elif r < 0.45:
            out += "{% set ns.v = " + v + " %}"
        elif r < 0.55 and depth < 3:
            out += "{% for m in messages %}" + random_statements(rng, depth + 1) + rng.choice(["", "{% else %}E"])
            out += "{% endfor %}"
        elif r < 0.62 and depth < 3:
            out += "{% for i in range(3) if i != 1 %}" + random_statements(rng, depth + 1)
            out += "{% if i == 2 %}{% break %}{% endif %}{% endfor %}"
        elif r < 0.7 and depth < 3:
            out += "{% if " + v + " %}" + random_statements(rng, depth + 1) + "{% else %}"
            out += random_statements(rng, depth + 1) + "{% endif %}"
        elif r < 0.76 and depth < 2:
            out += "{{ mac(" + v + ") }}"
        elif r < 0.8 and depth < 2:
            out += "{% call mac(" + v + ") %}" + random_statements(rng, depth + 1) + "{% endcall %}"
        elif r < 0.85:
            out += "{% set y %}" + rng.choice(["a", "{{ x }}"]) + "{% endset %}"
        else:
            out += rng.choice(["t", " ", "\n", "{{ x }}|{{ y }}"])
    return out


def compare(tokenmill_bin, tmp_path, env, sources, messages_json):
    messages = tmp_path / "messages.json"
    messages.write_text(messages_json)
    failures = []
    for n, source in enumerate(sources):
        path = tmp_path / f"t{n}.jinja"
        path.write_bytes(source.encode())
        proc = subprocess.run([tokenmill_bin, "template", "--chat-template-file", str(path), "--messages-file",
                               str(messages)], capture_output=True, timeout=60)
        status, expected = jinja2_render(env, source, json.loads(messages_json))
        if status == "error":
            ok = proc.returncode == 1
        else:
            ok = proc.returncode == 0 and proc.stdout.decode() == expected
        if not ok:
            failures.append(f"{source!r}: tokenmill {proc.stdout!r} (exit {proc.returncode}), jinja2 {expected!r}")
    assert not failures, f"{len(failures)} of {len(sources)} differ, e.g.\n" + "\n".join(failures[:5])


def make_env():
    return jinja2_sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                        extensions=["jinja2.ext.loopcontrols"])


def jinja2_render(env, source, messages):
    try:
        return "ok", env.from_string(source).render(messages=messages, add_generation_prompt=True, bos_token="",
                                                    eos_token="")
    except Exception:  # any rejection: tokenmill must reject the template too
        return "error", None


def test_whitespace_control_matches_jinja2(tokenmill_bin, tmp_path):
    rng = random.Random(20261207)
    compare(tokenmill_bin, tmp_path, make_env(), [random_template(rng) for _ in range(200)], "[]")


def test_scopes_macros_and_loops_match_jinja2(tokenmill_bin, tmp_path):
    rng = random.Random(20261208)
    prelude = ("{% set ns = namespace(v=0) %}{% macro mac(a, b=2) %}[{{ a }}{{ b }}"
               "{% if caller is defined %}{{ caller() }}{% endif %}{{ x }}]{% endmacro %}")
    sources = [prelude + random_statements(rng) for _ in range(400)]
    messages = json.dumps([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    compare(tokenmill_bin, tmp_path, make_env(), sources, messages)
