/* test_jinja_cases.h — generated, not hand-written: each template below with the
 * output Python's jinja2 3.1.6 renders for it in Hugging Face's environment
 * (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * extensions=[loopcontrols]) plus HF's tojson / raise_exception / strftime_now)
 * given the variables of JINJA_CASES_CTX. */
static const char *JINJA_CASES_CTX = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi <b>\"}, {\"role\": \"assistant\", \"content\": \"Yo\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [1.5, \"x\"]}}}]}], \"tools\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"d\": {\"b\": 1, \"a\": [1, 2, {\"c\": null}], \"z\": \"str\", \"f\": 2.5, \"t\": true}, \"s\": \"  Hello World  \", \"n\": -7, \"l\": [3, 1, 2], \"u\": \"h\\u00e9llo w\\u00f6rld \\u00df\"}";
static const struct { const char *tmpl, *want; } JINJA_CASES[] = {
  {"{{ d }}|{{ l }}|{{ messages[1] }}|{{ (1,2) }}|{{ (1,) }}|{{ () }}|{{ {'a': \"it's\"} }}|{{ ['a\"b', \"c'd\"] }}",
   "{'b': 1, 'a': [1, 2, {'c': None}], 'z': 'str', 'f': 2.5, 't': True}|[3, 1, 2]|{'role': 'assistant', 'content': 'Yo', 'tool_calls': [{'function': {'name': 'f', 'arguments': {'a': 1, 'b': [1.5, 'x']}}}]}|(1, 2)|(1,)|()|{'a': \"it's\"}|['a\"b', \"c'd\"]"},
  {"{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ \"\303\251\360\237\230\201\\n\"|tojson }}|{{ \"\303\251\360\237\230\201\"|tojson(ensure_ascii=true) }}",
   "{\"b\": 1, \"a\": [1, 2, {\"c\": null}], \"z\": \"str\", \"f\": 2.5, \"t\": true}|{\n"
    "  \"b\": 1,\n"
    "  \"a\": [\n"
    "    1,\n"
    "    2,\n"
    "    {\n"
    "      \"c\": null\n"
    "    }\n"
    "  ],\n"
    "  \"z\": \"str\",\n"
    "  \"f\": 2.5,\n"
    "  \"t\": true\n"
    "}|{\"a\": [1, 2, {\"c\": null}], \"b\": 1, \"f\": 2.5, \"t\": true, \"z\": \"str\"}|\"\303\251\360\237\230\201\\n\"|\"\\u00e9\\ud83d\\ude01\""},
  {"{{ d|tojson(separators=(',', ':')) }}|{{ [1.0, 1e20, 1.5e-7, 123456789.123, -0.0, 1e16, 1e15, 0.0001]|tojson }}|{{ {1: 2, none: 3, true: 4, 2.5: 1}|tojson }}",
   "{\"b\":1,\"a\":[1,2,{\"c\":null}],\"z\":\"str\",\"f\":2.5,\"t\":true}|[1.0, 1e+20, 1.5e-07, 123456789.123, -0.0, 1e+16, 1000000000000000.0, 0.0001]|{\"1\": 4, \"null\": 3, \"2.5\": 1}"},
  {"{{ [1.0, 1e20, 1.5e-7, 123456789.123, -0.0, 1e16, 1e15, 0.0001, 3.14159] }}|{{ 1e300*1e10 }}|{{ 2**62 }}|{{ 7/2 }}|{{ -7//2 }}|{{ 7.5//2 }}|{{ -7.5 % 2 }}|{{ 2**0.5 }}",
   "[1.0, 1e+20, 1.5e-07, 123456789.123, -0.0, 1e+16, 1000000000000000.0, 0.0001, 3.14159]|inf|4611686018427387904|3.5|-4|3.0|0.5|1.4142135623730951"},
  {"{%- for m in messages %}\n"
    "  {{ loop.index }} {{ m.role }}\n"
    "{%- endfor %}",
   "  1 user  2 assistant"},
  {"{% for m in messages %}\n"
    "    {% if m.role == 'user' %}\n"
    "        U: {{ m.content }}\n"
    "    {% else %}\n"
    "        A: {{ m.content }}\n"
    "    {% endif %}\n"
    "{% endfor %}\n"
    "end",
   "        U: Hi <b>\n"
    "        A: Yo\n"
    "end"},
  {"  {% if true %}\n"
    "  x\n"
    "  {% endif %}\n"
    "  {# comment #}\n"
    "  y {# c2 #} z\n"
    "  {%+ if true %}w{% endif %}",
   "  x\n"
    "  y  z\n"
    "  w"},
  {"a   {%- if true -%}   b   {%- endif -%}   c\n"
    "{{- ' d ' -}}\n"
    "  e",
   "abc d e"},
  {"{% raw %}{{ not }}{% endraw %}|{%- raw -%}  {{x}}  {%- endraw -%}|\n"
    "  {% raw %}\n"
    "  a\n"
    "  {% endraw %}\n"
    "b",
   "{{ not }}|{{x}}|\n"
    "\n"
    "  a\n"
    "b"},
  {"{{ s|trim }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split() }}|{{ s.split(' ') }}|{{ s.upper() }}|{{ s|lower }}|{{ s.title() }}|{{ s|title }}|{{ s|capitalize }}",
   "Hello World|Hello World|Hello World  |  Hello World|['Hello', 'World']|['', '', 'Hello', 'World', '', '']|  HELLO WORLD  |  hello world  |  Hello World  |  Hello World  |  hello world  "},
  {"{{ u.upper() }}|{{ u|upper }}|{{ u|length }}|{{ u[1] }}|{{ u[::-1] }}|{{ u|title }}|{{ u.capitalize() }}|{{ u.split('l', 1) }}|{{ u.rsplit('l', 1) }}|{{ u.find('w') }}",
   "H\303\211LLO W\303\226RLD SS|H\303\211LLO W\303\226RLD SS|13|\303\251|\303\237 dlr\303\266w oll\303\251h|H\303\251llo W\303\266rld SS|H\303\251llo w\303\266rld \303\237|['h\303\251', 'lo w\303\266rld \303\237']|['h\303\251llo w\303\266r', 'd \303\237']|6"},
  {"{{ \"a,b,,c\".split(',') }}|{{ \"  a  b \".split(none, 1) }}|{{ \"a b c\".rsplit(none, 1) }}|{{ \"abc\".replace('', '-') }}|{{ \"aaa\".replace('a','b',2) }}|{{ \"abcabc\".count('bc') }}|{{ \"x\".join(['a','b']) }}",
   "['a', 'b', '', 'c']|['a', 'b ']|['a b', 'c']|-a-b-c-|bba|2|axb"},
  {"{{ \"%s and %r\" % ('a', 'b') }}|{{ \"%5.2f|%-5d|%05d|%x|%o|%e|%g\" % (3.14159, 42, 42, 255, 8, 12345.678, 0.0001) }}|{{ \"%(a)s-%(b)d\" % {'a': 1, 'b': 2} }}|{{ \"%s\" % [1,2] }}|{{ \"%%\" % () }}",
   "a and 'b'| 3.14|42   |00042|ff|10|1.234568e+04|0.0001|1-2|[1, 2]|%"},
  {"{{ \"{} {}\".format(1, 'a') }}|{{ \"{0}{1}{0}\".format('x','y') }}|{{ \"{name}!\".format(name='n') }}|{{ \"{:>5}|{:<5}|{:^5}|{:05d}|{:.2f}|{:,}\".format('a','b','c',42,3.14159,1234567) }}|{{ \"{!r}\".format('q') }}",
   "1 a|xyx|n!|    a|b    |  c  |00042|3.14|1,234,567|'q'"},
  {"{{ l|sort }}|{{ l|sort(reverse=true) }}|{{ ['b','A','c']|sort }}|{{ ['b','A','c']|sort(case_sensitive=true) }}|{{ messages|map(attribute='role')|join(',') }}|{{ [1,2,3]|sum }}|{{ l|max }}|{{ l|min }}",
   "[1, 2, 3]|[3, 2, 1]|['A', 'b', 'c']|['A', 'b', 'c']|user,assistant|6|3|1"},
  {"{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|{{ [0,1,'',none,'a']|select|list }}|{{ [1,2,3,4]|reject('odd')|list }}",
   "1|['Yo']|[1, 'a']|[2, 4]"},
  {"{{ d|items|list }}|{{ d.items()|list }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.get('z') }}|{{ d.get('q', 'dflt') }}|{{ d.get('q') }}|{{ d|dictsort }}|{{ d|length }}",
   "[('b', 1), ('a', [1, 2, {'c': None}]), ('z', 'str'), ('f', 2.5), ('t', True)]|[('b', 1), ('a', [1, 2, {'c': None}]), ('z', 'str'), ('f', 2.5), ('t', True)]|['b', 'a', 'z', 'f', 't']|[1, [1, 2, {'c': None}], 'str', 2.5, True]|str|dflt|None|[('a', [1, 2, {'c': None}]), ('b', 1), ('f', 2.5), ('t', True), ('z', 'str')]|5"},
  {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'abc' %}{{ c }}{% endfor %}",
   "b=1;a=[1, 2, {'c': None}];z=str;f=2.5;t=True;|bazft|abc"},
  {"{% for x in [1,2,3,4,5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
   "13"},
  {"{% for x in l %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }}{{ loop.depth }},{% endfor %}",
   "032TrueFalse3a1,121FalseFalse3b1,210FalseTrue3a1,"},
  {"{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}",
   "TrueFalseTrue"},
  {"{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a * 2 %}{% set ns.b = ns.b + [i] %}{% endfor %}{{ ns.a }}{{ ns.b }}",
   "8[0, 1, 2]"},
  {"{% macro m(a, b=2, c='x') %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c='y') }}{{ m(a=5) }}",
   "[12x][13x][12y][52x]"},
  {"{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}",
   "(2, 3){'x': 4}"},
  {"{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}inner{% endcall %}",
   "<inner>"},
  {"{% macro m(x) %}{{ caller(x * 2) }}{% endmacro %}{% call(y) m(21) %}[{{ y }}]{% endcall %}",
   "[42]"},
  {"{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% set z %}a{{ 1 }}b{% endset %}{{ z }}|{% set q | trim %}  qq  {% endset %}[{{ q }}]",
   "HELLO X|a1b|[qq]"},
  {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}",
   "3"},
  {"{{ x is defined }}{{ d is mapping }}{{ l is sequence }}{{ 'a' is string }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is sameas true }}{{ none is none }}{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'x' is in 'xyz' }}{{ 2 is gt 1 }}{{ 1 is lt 2 }}{{ 2 is ge 2 }}{{ 'upper' is filter }}{{ 'odd' is test }}",
   "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue"},
  {"{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' in ['a'] }}{{ 'b' not in 'abc' }}{{ not none }}{{ none or 'x' }}{{ 0 and 1 }}{{ '' or [] }}",
   "TrueTrueTrueTrueFalseTrueFalseTruex0[]"},
  {"{{ \"abc\"[1:] }}{{ \"abc\"[:-1] }}{{ \"abcdef\"[::2] }}{{ l[::-1] }}{{ l[-2:] }}{{ l[5:] }}{{ l[-10:1] }}{{ \"abc\"[-1] }}{{ l[1] }}{{ messages[0]['content'] }}{{ messages[0].content }}",
   "bcabace[2, 1, 3][1, 2][][3]c1Hi <b>Hi <b>"},
  {"{{ [1,2,3,4,5]|batch(2)|list }}|{{ [1,2,3,4,5]|batch(2, 'x')|list }}|{{ [1,2,3,4,5]|slice(2)|list }}|{{ [1,2,3,4,5]|slice(3, 0)|list }}|{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ 'abc'|first }}",
   "[[1, 2], [3, 4], [5]]|[[1, 2], [3, 4], [5, 'x']]|[[1, 2, 3], [4, 5]]|[[1, 2], [3, 4], [5, 0]]|13a"},
  {"{{ \"line1\\nline2\\n\\nline4\"|indent(2) }}|{{ \"a\\nb\"|indent(2, first=true) }}|{{ \"a\\n\\nb\"|indent(2, blank=true) }}|{{ \"a\\nb\"|indent('--') }}",
   "line1\n"
    "  line2\n"
    "\n"
    "  line4|  a\n"
    "  b|a\n"
    "  \n"
    "  b|a\n"
    "--b"},
  {"{{ 3.7|round }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ 3.14159|round(2, 'floor') }}|{{ 3.1|round(0, 'ceil') }}|{{ 42|round }}|{{ \"3\"|int }}|{{ \"0x1A\"|int(base=16) }}|{{ \" 4 \"|int }}|{{ \"4.7\"|int }}|{{ \"abc\"|float }}|{{ \"1e3\"|float }}|{{ 5|float }}",
   "4.0|2.0|3.14|3.14|4.0|42|3|26|4|4|0.0|1000.0|5.0"},
  {"{{ \"hello world foo bar\"|truncate(9) }}|{{ \"hello world foo bar\"|truncate(9, true) }}|{{ \"hello\"|truncate(3) }}|{{ \"hello world\"|wordcount }}|{{ \"<p>a  <b>b</b></p>\"|striptags }}|{{ \"a b/c\"|urlencode }}|{{ \"ab\"|center(6) }}|",
   "hello...|hello ...|hello|2|a b|a%20b/c|  ab  |"},
  {"{{ [{'a':2,'b':'x'},{'a':1,'b':'y'},{'a':2,'b':'z'}]|groupby('a') }}|{{ [3,1,3,2,1]|unique|list }}|{{ ['a','A','b']|unique|list }}|{{ [{'a':2},{'a':1}]|sort(attribute='a') }}",
   "[(1, [{'a': 1, 'b': 'y'}]), (2, [{'a': 2, 'b': 'x'}, {'a': 2, 'b': 'z'}])]|[3, 1, 2]|['a', 'b']|[{'a': 1}, {'a': 2}]"},
  {"{{ \"<a href='x'>\"|e }}|{{ \"<a>\"|escape|escape }}|{{ (\"<\" ~ \"x\"|safe) }}|{{ (\"a\"|safe + \"<\") }}|{{ \"x\"|safe|length }}|{{ \"x\"|forceescape }}|{{ \"a&b\"|safe ~ \"<\" }}",
   "&lt;a href=&#39;x&#39;&gt;|&lt;a&gt;|<x|a&lt;|1|x|a&b<"},
  {"{{ range(5)|list }}|{{ range(1, 10, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list }}|{{ dict(a=1, b=2) }}|{{ namespace(x=1) }}",
   "[0, 1, 2, 3, 4]|[1, 4, 7]|[5, 3, 1]|[]|{'a': 1, 'b': 2}|<Namespace {'x': 1}>"},
  {"{%- set x = [1,2] -%}{{ x|join(', ') }}|{{ [1,none,'a']|join }}|{{ x + [3] }}|{{ x * 2 }}|{{ 'ab' * 3 }}|{{ (1,2) + (3,) }}|{{ 1 ~ 2 ~ none }}|{{ true ~ '' }}",
   "1, 2|1Nonea|[1, 2, 3]|[1, 2, 1, 2]|ababab|(1, 2, 3)|12None|True"},
  {"{{ messages[0]['role'] == 'user' and 'yes' or 'no' }}|{{ 'y' if messages|length > 1 else 'n' }}|{{ 'x' if false }}|{{ -n }}|{{ +n }}|{{ n|abs }}|{{ -n|abs }}",
   "yes|y||7|-7|7|7"},
  {"{% if messages[1].tool_calls %}{% for tc in messages[1].tool_calls %}{{ tc.function.name }}({{ tc.function.arguments|tojson }}){% endfor %}{% endif %}",
   "f({\"a\": 1, \"b\": [1.5, \"x\"]})"},
  {"{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x','c')) }}{{ 'abc'.startswith('b') }}{{ 'a-b'.partition('-') }}{{ '5'.zfill(3) }}{{ 'ab'.ljust(4, '*') }}|{{ 'ab'.rjust(4) }}|{{ 'aBc'.swapcase() }}{{ 'abc'.isalpha() }}{{ '12'.isdigit() }}{{ ' '.isspace() }}",
   "TrueTrueFalse('a', '-', 'b')005ab**|  ab|AbCTrueTrueTrue"},
  {"{% set a = 1 %}{% if true %}{% set a = 2 %}{% endif %}{{ a }}{% for i in [1] %}{% set a = 3 %}{{ a }}{% endfor %}{{ a }}",
   "232"},
  {"{% for i in [1,2] %}{% for j in [3,4] %}{{ loop.index }}{{ i }}{{ j }}{% endfor %}/{{ loop.index }}|{% endfor %}",
   "113214/1|123224/2|"},
  {"{% for x in [1,2,3] if x > 1 %}{{ x }}{{ loop.index }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}",
   "212322|empty"},
  {"{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}|{% set a, b = 'xy' %}{{ a }}{{ b }}",
   "1234|xy"},
  {"{{ \"a\" \"b\" 'c' }}|{{ 'it\\'s' }}|{{ \"tab\\there\" }}|{{ \"\\x41\\u00e9\\U0001F600\\101\" }}|{{ \"back\\\\slash\" }}|{{ \"unk\\qown\" }}|{{ '\\n'|length }}",
   "abc|it's|tab\there|A\303\251\360\237\230\200A|back\\slash|unk\\qown|1"},
  {"{{ 0b101 }}|{{ 0o17 }}|{{ 0xff }}|{{ 1_000 }}|{{ 1.5e3 }}|{{ 1E2 }}|{{ 10 % 3 }}|{{ 2 ** 10 }}|{{ 1.5 + 1 }}|{{ true + 1 }}",
   "5|15|255|1000|1500.0|100.0|1|1024|2.5|2"},
  {"{{ messages|length }}{{ messages|first|attr('role') }}{{ l|list|reverse|list }}{{ 'abc'|reverse }}{{ l|reverse|first }}",
   "2[2, 1, 3]cba2"},
  {"{{ d.a|map('string')|join('|') }}|{{ ['a','b']|map('upper')|list }}|{{ [1,2]|map('string')|list }}|{{ [{'x':{'y':1}}]|map(attribute='x.y')|list }}|{{ [[1,2]]|map(attribute='0')|list }}|{{ [{'a':1},{}]|map(attribute='a', default=0)|list }}",
   "1|2|{'c': None}|['A', 'B']|['1', '2']|[1]|[1]|[1, 0]"},
  {"{%- macro f(n) -%}{%- if n > 0 -%}{{ n }}{{ f(n - 1) }}{%- endif -%}{%- endmacro -%}{{ f(5) }}",
   "54321"},
  {"{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }}",
   "6"},
  {"{{ \"%s\" % none }}|{{ \"%d%%\" % 50 }}|{{ '%.3s' % 'abcdef' }}|{{ '%c' % 65 }}|{{ '%+d % d' % (5, 5) }}|{{ '%10.3e' % 1234.5 }}|{{ '%#x' % 255 }}",
   "None|50%|abc|A|+5  5| 1.234e+03|0xff"},
  {"{{ d|tojson(indent=4) }}|{{ [[], {}, [1]]|tojson(indent=1) }}|{{ 'x'|tojson }}|{{ none|tojson }}|{{ (1,2)|tojson }}|{{ d|tojson(indent='\\t') }}",
   "{\n"
    "    \"b\": 1,\n"
    "    \"a\": [\n"
    "        1,\n"
    "        2,\n"
    "        {\n"
    "            \"c\": null\n"
    "        }\n"
    "    ],\n"
    "    \"z\": \"str\",\n"
    "    \"f\": 2.5,\n"
    "    \"t\": true\n"
    "}|[\n"
    " [],\n"
    " {},\n"
    " [\n"
    "  1\n"
    " ]\n"
    "]|\"x\"|null|[1, 2]|{\n"
    "\t\"b\": 1,\n"
    "\t\"a\": [\n"
    "\t\t1,\n"
    "\t\t2,\n"
    "\t\t{\n"
    "\t\t\t\"c\": null\n"
    "\t\t}\n"
    "\t],\n"
    "\t\"z\": \"str\",\n"
    "\t\"f\": 2.5,\n"
    "\t\"t\": true\n"
    "}"},
  {"{{ d.f|string }}{{ d.t|string }}{{ none|string }}{{ d|string }}{{ l|pprint }}\n"
    "",
   "2.5TrueNone{'b': 1, 'a': [1, 2, {'c': None}], 'z': 'str', 'f': 2.5, 't': True}[3, 1, 2]"},
  {"{{ undefined_var }}|{{ undefined_var|default('d') }}|{{ undefined_var is defined }}|{% for x in undefined_var %}x{% endfor %}|{{ undefined_var|length }}|{{ undefined_var|list }}|{{ undefined_var|trim }}",
   "|d|False||0|[]|"},
  {"{{ l[10] }}|{{ d['nokey'] }}|{{ 'abc'[10] }}",
   "||"},
  {"{{ none.x }}",
   ""},
  {"{{ d|tojson(indent=2, sort_keys=true) }}",
   "{\n"
    "  \"a\": [\n"
    "    1,\n"
    "    2,\n"
    "    {\n"
    "      \"c\": null\n"
    "    }\n"
    "  ],\n"
    "  \"b\": 1,\n"
    "  \"f\": 2.5,\n"
    "  \"t\": true,\n"
    "  \"z\": \"str\"\n"
    "}"},
  {"{% set x = undefined_var %}{{ x }}|{{ x is defined }}",
   "|False"},
  {"{%- if false %}a{% elif true %}b{% else %}c{% endif -%}|{% if 0 %}{% elif '' %}{% else %}else{% endif %}",
   "b|else"},
  {"   {%- for i in range(2) %}\n"
    "      item{{ i }}\n"
    "   {%- endfor %}",
   "      item0      item1"},
  {"x {%- if true %} y {% endif -%} z",
   "x y z"},
  {"line1\n"
    "    {# indented comment #}\n"
    "line2\n"
    "  {#- stripped -#}\n"
    "line3",
   "line1\n"
    "line2line3"},
  {"{% for i in range(3) -%}\n"
    "{{ i }}\n"
    "{% endfor %}",
   "0\n"
    "1\n"
    "2\n"
    ""},
  {"{{ \"a\" }}\n"
    "  {{ \"b\" }}\n"
    "{% if true %}\n"
    "  c\n"
    "{%- endif %}",
   "a\n"
    "  b\n"
    "  c"},
  {"{% set s %}\n"
    "  multi\n"
    "  line\n"
    "{% endset %}[{{ s }}]",
   "[  multi\n"
    "  line\n"
    "]"},
  {"\t{% if true %}tab{% endif %}\n"
    " \t {% if true %}mixed{% endif %}",
   "tabmixed"},
  {"{{ 'x' }}   {% if true %}y{% endif %}",
   "x   y"},
  {"{{- '  lead' }}|   {{- 'x' -}}   |",
   "  lead|x|"},
  {"a {#- c #} b {# c -#} c {#+ c +#} d",
   "a b c  d"},
  {"{% if true %}\n"
    "\n"
    "{% endif %}\n"
    "end",
   "\n"
    "end"},
  {"{{ messages[0]['content']|e }}{{ messages[0].content|safe }}",
   "Hi &lt;b&gt;Hi <b>"},
  {"{{ \"%s\" % \"<b>\"|safe }}",
   "<b>"},
  {"{{ [1,2,3]|selectattr('x')|list }}",
   "[]"},
  {"{{ {'a': 1}.a }}{{ {'a': 1}['a'] }}{{ {'items': 5}['items'] }}{{ {'items': 5}.items is defined }}",
   "115True"},
  {"{{ loop }}",
   ""},
  {"{{ ns }}{% set ns = namespace() %}{% set ns.x = 1 %}{{ ns.x }}{{ ns['x'] }}",
   "11"},
  {"{{ [1,2,3][1:2] }}{{ (1,2,3)[::2] }}{{ \"h\303\251llo\"[1:3] }}",
   "[2](1, 3)\303\251l"},
  {"{{ {'b':1,'a':2}|dictsort(by='value') }}|{{ {'b':1,'A':2}|dictsort }}|{{ {'b':1,'a':2}|dictsort(reverse=true) }}",
   "[('b', 1), ('a', 2)]|[('A', 2), ('b', 1)]|[('b', 1), ('a', 2)]"},
  {"{{ 'abc' ~ 1.0 ~ [1] ~ {'a':none} ~ (1,) }}",
   "abc1.0[1]{'a': None}(1,)"},
  {"{{ \"caf\\u00e9\"|tojson(ensure_ascii=true) }}|{{ \"\\u0001\\u007f\"|tojson }}|{{ \"\\u2028\"|tojson }}",
   "\"caf\\u00e9\"|\"\\u0001\177\"|\"\342\200\250\""},
  {"{{ 1e-5 }}{{ 123e-20 }}{{ 1/3*3 }}{{ 0.1*3 }}{{ 1e22 }}{{ 12345678901234567890.0 }}{{ 5e-324 }}{{ 1.7976931348623157e308 }}",
   "1e-051.23e-181.00.300000000000000041e+221.2345678901234567e+195e-3241.7976931348623157e+308"},
  {"{{ \"  x\\t\\n\"|trim }}|{{ \"xxaxx\"|trim('x') }}|{{ \"abc\".strip('ac') }}",
   "x|a|b"},
  {"{{ messages|map(attribute='role')|unique|list }}|{{ messages|map(attribute='nothere')|list }}",
   "['user', 'assistant']|[Undefined, Undefined]"},
  {"{{ 3|string + 'x' }}|{{ (3|string).zfill(3) }}",
   "3x|003"},
  {"{% macro m(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }}|{{ m(b=2) }}",
   "1-|-2"},
  {"{{ 5 is odd }}{{ 5.0 is odd }}{{ 2 is even }}{{ none is boolean }}{{ false is false }}{{ 1 is true }}{{ 'A' is upper }}{{ 1 is number }}{{ 'x' is iterable }}{{ 1 is iterable }}",
   "TrueTrueTrueFalseTrueFalseTrueTrueTrueFalse"},
  {"{{ \"{0[0]} {1.role}\".format([7], messages[0]) }}|{{ \"{:x} {:b} {:o} {:e}\".format(255, 5, 8, 1234.5) }}|{{ \"{:+d} {: d}\".format(3, 3) }}|{{ \"{:10.3f}|{:<8.2%}\".format(3.14159, 0.25) }}|{{ \"{}\".format(1.5) }}|{{ \"{:*^9}\".format('mid') }}\n"
    "",
   "7 user|ff 101 10 1.234500e+03|+3  3|     3.142|25.00%  |1.5|***mid***"},
  {"{% for item in [{'n':'a','c':[{'n':'b','c':[]}]},{'n':'c','c':[]}] recursive %}<{{ item.n }}{{ loop.depth }}{% if item.c %}{{ loop(item.c) }}{% endif %}>{% endfor %}",
   "<a1<b2>><c1>"},
  {"{%- set x = 1 -%}\n"
    "  {%- for i in [1] %}\n"
    "    {{- x }}\n"
    "  {%- endfor %}",
   "1"},
  {"{% if true %}  {% endif %}|\n"
    "   {%- if true %}\n"
    " a\n"
    "   {% endif -%}\n"
    "b",
   "  | a\n"
    "b"},
  {"  {{ 'a' }}  {% if true %}b{% endif %}\n"
    "    {% if true %}c{% endif %}  {{ 'd' }}",
   "  a  bc  d"},
  {"text {% if true %}\n"
    "    inner\n"
    "{% endif %} after",
   "text     inner\n"
    " after"},
  {"{% set ns = namespace(items=[]) %}{% for m in messages %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.items|join(',') }}",
   "user,assistant"},
  {"{% for m in messages %}{% set outer = m.role %}{% endfor %}{{ outer is defined }}",
   "False"},
  {"{% macro outer() %}{% macro inner() %}in{% endmacro %}{{ inner() }}-{{ caller() if caller is defined else 'nocaller' }}{% endmacro %}{{ outer() }}",
   "in-nocaller"},
  {"{% set a = {'k': [1, {'z': 'deep'}]} %}{{ a.k[1].z }}{{ a['k'][-1]['z'][::-1] }}",
   "deeppeed"},
  {"{{ messages|selectattr('tool_calls', 'defined')|list|length }}|{{ messages|selectattr('role', 'in', ['user'])|list|length }}|{{ messages|map(attribute='role')|select('equalto', 'user')|list }}",
   "1|1|['user']"},
  {"{{ \"%-10s|\" % \"ab\" }}{{ \"%5s|\" % \"\303\251\" }}{{ \"%.1f\" % 2.25 }}{{ \"%.0f\" % 0.5 }}{{ \"%d\" % 3.9 }}{{ \"%s %s\" % (\"a\", (\"b\",)) }}",
   "ab        |    \303\251|2.203a ('b',)"},
  {"{{ 0.1 + 0.2 }}|{{ 1e100 }}|{{ 2.0 ** 100 }}|{{ 1 / 7 }}|{{ 100.0 }}|{{ 1234567890123456789.0 }}|{{ -1.5e-10 }}|{{ 3 * 1.1 }}",
   "0.30000000000000004|1e+100|1.2676506002282294e+30|0.14285714285714285|100.0|1.2345678901234568e+18|-1.5e-10|3.3000000000000003"},
  {"{% for x in 'ab' %}{% for y in 'cd' %}{% if y == 'd' %}{% break %}{% endif %}{{ x }}{{ y }}{% endfor %}{% endfor %}",
   "acbc"},
  {"{%- for i in range(3) -%}\n"
    "    {%- if i == 1 -%}{%- continue -%}{%- endif -%}\n"
    "    [{{ i }}]\n"
    "{%- else -%}\n"
    "none\n"
    "{%- endfor -%}",
   "[0][2]"},
  {"{{ [3, 1, 2]|sort|first }}{{ {'x': 1}|list }}{{ 'hello'|list|unique|list|length }}{{ [1,[2,3]]|length }}",
   "1['x']42"},
  {"{% set x %}{% for i in range(3) %}{{ i }}{% endfor %}{% endset %}{{ x|length }}{{ x|int + 1 }}",
   "313"},
  {"{{ messages[0].content.upper() }}{{ messages[0]['content'].split('<')[0] }}{{ messages|last|attr('content') }}",
   "HI <B>Hi "},
  {"{{ none|tojson }}{{ true|tojson }}{{ 1.5|tojson }}{{ 'a\"b\\\\c\\n\\t\\u0008\\u000c\\u001f'|tojson }}{{ {'k': [1, {'q': none}]}|tojson(indent=2, separators=(',', ': ')) }}",
   "nulltrue1.5\"a\\\"b\\\\c\\n\\t\\b\\f\\u001f\"{\n"
    "  \"k\": [\n"
    "    1,\n"
    "    {\n"
    "      \"q\": null\n"
    "    }\n"
    "  ]\n"
    "}"},
  {"{{ d|tojson(indent=0) }}|{{ [1,2]|tojson(indent=-1) }}|{{ {}|tojson(indent=2) }}|{{ {'a':{}}|tojson(indent=2) }}",
   "{\n"
    "\"b\": 1,\n"
    "\"a\": [\n"
    "1,\n"
    "2,\n"
    "{\n"
    "\"c\": null\n"
    "}\n"
    "],\n"
    "\"z\": \"str\",\n"
    "\"f\": 2.5,\n"
    "\"t\": true\n"
    "}|[\n"
    "1,\n"
    "2\n"
    "]|{}|{\n"
    "  \"a\": {}\n"
    "}"},
  {"{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set system_message = messages[0]['content'] -%}\n"
    "{%- endif -%}\n"
    "{{ system_message is defined }}",
   "False"},
  {"{% set x = [1, 2, 3] %}{{ x[0:2] }}{{ x[:] }}{{ x[::2] }}{{ x[-1:-3:-1] }}{{ x[10:] }}{{ x[-100:100] }}",
   "[1, 2][1, 2, 3][1, 3][3, 2][][1, 2, 3]"},
  {"{{ '  abc  '|trim('  a') }}|{{ 'a\\u00a0'|trim|length }}|{{ '\\u3000x\\u3000'.strip() }}",
   "bc|1|x"},
  {"{{ ('a'|safe).upper() }}{{ ('<'|safe) ~ '>' }}{{ ('<a>'|safe)|trim }}{{ ('x'|safe) + ('<'|safe) }}{{ '<' + ('x'|safe) }}",
   "A<><a>x<&lt;x"},
  {"{{ [1, 2, 3]|map('string')|join }}{{ [1.5, 2]|sum }}{{ []|sum }}{{ [[1],[2]]|sum(start=[]) }}",
   "1233.50[1, 2]"},
  {"{{ [{'a':1,'b':2}]|map(attribute='a')|first }}{{ {'a': 1}|items|first }}{{ {'b':1,'a':2}|dictsort|first }}",
   "1('a', 1)('a', 2)"},
  {"{% if 'x' is in ['x'] and not 'y' in ['x'] and 'tool_calls' in messages[1] %}ok{% endif %}",
   "ok"},
  {"{{ messages[1].tool_calls[0].function.arguments|tojson }}|{{ messages[1].tool_calls[0]['function']['arguments']['b'][0] }}",
   "{\"a\": 1, \"b\": [1.5, \"x\"]}|1.5"},
  {"{% for x in [1] %}{{ loop.previtem is defined }}{{ loop.nextitem is undefined }}{% endfor %}",
   "FalseTrue"},
  {"{{ 'abc'|batch(2)|list }}{{ 'ab' in 'xaby' }}{{ '' in 'x' }}{{ 1 in [1.0] }}{{ none in [none] }}",
   "[['a', 'b'], ['c']]TrueTrueTrueTrue"},
  {"{{ \"a\\tb\"|indent }}|{{ \"x\\r\\ny\\rz\"|indent(1) }}|{{ \"\"|indent(first=true) }}|",
   "a\tb|x\n"
    " y\n"
    " z|    |"},
  {"{{ \"ab cd-ef(gh\"|title }}|{{ \"ab cd-ef(gh\".title() }}|{{ \"o'neil 2nd\"|title }}|{{ \"o'neil 2nd\".title() }}|{{ \"\303\211COLE\"|lower }}|{{ \"stra\303\237e\".upper() }}",
   "Ab Cd-Ef(Gh|Ab Cd-Ef(Gh|O'neil 2nd|O'Neil 2Nd|\303\251cole|STRASSE"},
  {"{{ range(3)|reverse|list }}{{ (1,2,3)|reverse|list }}{{ {'a':1,'b':2}|reverse|list }}",
   "[2, 1, 0][3, 2, 1]['b', 'a']"},
  {"{% set t = (1, 2) %}{{ t.count(1) }}{{ t.index(2) }}{{ t[1] }}{{ t + (3,) }}{{ t * 2 }}{{ t|list }}\n"
    "",
   "112(1, 2, 3)(1, 2, 1, 2)[1, 2]"},
  {"{{ [1]|select|first }}|{% if []|select %}T{% endif %}|{{ {\"a\":1}.items()|length }}|{{ {\"a\":1}.items() }}|{{ [1]|map(\"string\") == [\"1\"] }}|{{ ([1]|select)[0] }}|{{ \"ab\"|reverse|length }}",
   "1|T|1|dict_items([('a', 1)])|False||2"},
  {"{% set g = [1,2]|select %}{{ g|list }}{{ g|list }}|{{ {\"a\":1}.keys()|list }}{{ \"a\" in {\"a\":1}.keys() }}{{ {\"a\":1}.values()|list }}|{{ {\"a\": 1}.items()|list|tojson }}",
   "[1, 2][]|['a']True[1]|[[\"a\", 1]]"},
  {"{% for k, v in {\"a\": 1}|items %}{{ k }}{{ v }}{{ loop.length }}{% endfor %}|{{ messages|map(attribute='role')|list|tojson }}\n"
    "",
   "a11|[\"user\", \"assistant\"]"},
};
