"""Whitespace control of the chat-template engine against Python's jinja2:
random templates built from text, {{ }}, {# #}, if/else, for, set and raw
tags with every -, + and plain delimiter, rendered by `tokenmill template`
and by jinja2 with Hugging Face's settings (trim_blocks, lstrip_blocks).
The two must give the same bytes, or both reject the template. The seed is
fixed, so a failure reproduces."""
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


def jinja2_render(env, source):
    try:
        return "ok", env.from_string(source).render(messages=[])
    except Exception:  # any rejection: tokenmill must reject the template too
        return "error", None


def test_whitespace_control_matches_jinja2(tokenmill_bin, tmp_path):
    env = jinja2_sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    rng = random.Random(20261207)
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps([]))
    failures = []
    for n in range(200):
        source = random_template(rng)
        path = tmp_path / f"t{n}.jinja"
        path.write_bytes(source.encode())
        proc = subprocess.run([tokenmill_bin, "template", "--chat-template-file", str(path), "--messages-file",
                               str(messages)], capture_output=True, timeout=60)
        status, expected = jinja2_render(env, source)
        if status == "error":
            ok = proc.returncode == 1
        else:
            ok = proc.returncode == 0 and proc.stdout.decode() == expected
        if not ok:
            failures.append(f"{source!r}: tokenmill {proc.stdout!r} (exit {proc.returncode}), jinja2 {expected!r}")
    assert not failures, f"{len(failures)} of 200 differ, e.g.\n" + "\n".join(failures[:5])
