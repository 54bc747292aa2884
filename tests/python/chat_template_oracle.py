"""The oracle of the chat-template conformance corpus: Python jinja2
rendering a chat template the way Hugging Face transformers'
`apply_chat_template` does (its documented behaviour, reproduced here):

- an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
  loopcontrols extension ({% break %}, {% continue %}) and the
  {% generation %}...{% endgeneration %} tag (which only renders its body;
  transformers uses it to mark assistant tokens);
- the filter tojson = json.dumps(x, ensure_ascii=False, indent=...,
  separators=..., sort_keys=...) (jinja2's own tojson escapes HTML
  characters, which transformers does not);
- the globals raise_exception(message), which raises, and
  strftime_now(format) = datetime.now().strftime(format);
- render(messages=..., tools=..., add_generation_prompt=..., bos_token=...,
  eos_token=..., **kwargs (the chat template kwargs, e.g. enable_thinking)).

One deliberate difference: tools is defined only when the conversation has
tools (as a server passes them), where transformers passes tools=None (and
documents=None) always. With tools=None the tool-use templates of Cohere
command-r-plus and Hermes 2/3 fail on every conversation without tools
(they iterate over tools), a failure a server would never show.

The corpus: every tests/data/chat_templates/*.jinja with every conversation
of tests/data/chat_template_conversations.json. cases() yields
(template_path, conversation); render_expected(case) gives ("ok", text) or
("error", message); a template that jinja2 cannot compile is an expected
error for each of its cases.

As a script: `chat_template_oracle.py --stats` renders every case and prints
the counts and the wall time; `chat_template_oracle.py TEMPLATE CONVERSATION`
prints one rendering (names as in the case ids, e.g. `google-gemma-2-2b-it
multi_turn`)."""
import argparse
import copy
import functools
import json
import os
import sys
import time
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data")
TEMPLATES_DIR = os.path.join(DATA, "chat_templates")
CONVERSATIONS_FILE = os.path.join(DATA, "chat_template_conversations.json")

# The bos_token and eos_token each template is rendered with, by family: the
# first (case-insensitive) substring of the file name that matches wins,
# otherwise DEFAULT_SPECIAL_TOKENS. They are the models' usual tokens, but
# exactness does not matter: the oracle and tokenmill get the same values.
SPECIAL_TOKENS = {
    "llama-3": ("<|begin_of_text|>", "<|eot_id|>"),       # Llama 3.x, Hermes on Llama 3, firefunction
    "distill-llama": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "functionary": ("<|begin_of_text|>", "<|eot_id|>"),   # Llama 3.1 based
    "gemma": ("<bos>", "<eos>"),
    "qwen": ("<|endoftext|>", "<|im_end|>"),               # Qwen 2.5, QwQ, Qwen 3
    "cohere": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "phi-3": ("<s>", "<|endoftext|>"),
    "lfm2": ("<|startoftext|>", "<|im_end|>"),
    "mistral": ("<s>", "</s>"),                             # Mistral, Ministral, Devstral
}
DEFAULT_SPECIAL_TOKENS = ("<s>", "</s>")


def special_tokens(template_path):
    """(bos_token, eos_token) for a template file."""
    name = os.path.basename(template_path).lower()
    for key, tokens in SPECIAL_TOKENS.items():
        if key in name:
            return tokens
    return DEFAULT_SPECIAL_TOKENS


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        parser.stream.expect("name:generation")
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class TemplateRaised(Exception):
    """raise_exception(message) from a template."""


def _raise_exception(message):
    raise TemplateRaised(message)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", GenerationTag])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = make_environment()


@functools.lru_cache(maxsize=None)
def _compile(template_path):
    """The compiled template, or the compile error's message (a string)."""
    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateError as exc:
        return f"{type(exc).__name__}: {exc}"


def template_paths():
    return sorted(os.path.join(TEMPLATES_DIR, name) for name in os.listdir(TEMPLATES_DIR)
                  if name.endswith(".jinja"))


def conversations():
    with open(CONVERSATIONS_FILE, encoding="utf-8") as f:
        return json.load(f)


def cases():
    """(template_path, conversation) for every template and conversation."""
    convs = conversations()
    for path in template_paths():
        for conv in convs:
            yield path, conv


def case_id(case):
    path, conv = case
    return f"{os.path.basename(path)[:-len('.jinja')]}::{conv['name']}"


def render(template_path, messages, tools=None, add_generation_prompt=True, kwargs=None):
    """The rendered text; raises on a compile or render error."""
    template = _compile(template_path)
    if isinstance(template, str):
        raise jinja2.TemplateSyntaxError(template, 0)
    bos, eos = special_tokens(template_path)
    context = dict(kwargs or {})
    context.update(messages=copy.deepcopy(messages), add_generation_prompt=add_generation_prompt,
                   bos_token=bos, eos_token=eos)
    if tools is not None:
        context["tools"] = copy.deepcopy(tools)
    return template.render(**context)


def render_expected(case):
    """("ok", text) or ("error", message) for one (template_path, conversation)."""
    path, conv = case
    compiled = _compile(path)
    if isinstance(compiled, str):
        return "error", compiled
    try:
        return "ok", render(path, conv["messages"], tools=conv.get("tools"),
                            add_generation_prompt=conv.get("add_generation_prompt", True),
                            kwargs=conv.get("kwargs"))
    except Exception as exc:  # any error is an expected error: tokenmill must fail too
        return "error", f"{type(exc).__name__}: {exc}"


def _stats():
    start = time.perf_counter()
    paths = template_paths()
    uncompiled = [p for p in paths if isinstance(_compile(p), str)]
    compiled_at = time.perf_counter()
    results = [(case, render_expected(case)) for case in cases()]
    done = time.perf_counter()
    errors = [(case_id(c), r[1]) for c, r in results if r[0] == "error"]
    print(f"templates {len(paths)} ({len(uncompiled)} not compiling), conversations {len(conversations())}, "
          f"cases {len(results)}, jinja2 errors {len(errors)}; wall time {done - start:.2f} s "
          f"(compiling {compiled_at - start:.2f} s, rendering {done - compiled_at:.2f} s)")
    for cid, message in errors:
        print(f"  error  {cid}: {message[:120]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stats", action="store_true", help="render every case; print counts and time")
    parser.add_argument("template", nargs="?", help="template file or name (without .jinja)")
    parser.add_argument("conversation", nargs="?", help="conversation name")
    args = parser.parse_args(argv)
    if args.stats or not args.template:
        _stats()
        return 0
    path = args.template
    if not os.path.exists(path):
        path = os.path.join(TEMPLATES_DIR, args.template + ".jinja")
    convs = {c["name"]: c for c in conversations()}
    names = [args.conversation] if args.conversation else list(convs)
    for name in names:
        status, text = render_expected((path, convs[name]))
        if len(names) > 1:
            print(f"===== {name}: {status}")
        sys.stdout.write(text if status == "ok" else f"error: {text}\n")
        if len(names) > 1:
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
