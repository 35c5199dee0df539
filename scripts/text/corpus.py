"""The texts the tokenizer goldens cover (scripts/text/gen_goldens.py): hand-picked cases per pattern rule, long
runs around tiktoken's and tokenization_kimi.py's limits, and seeded random Unicode strings."""
import random

# Text through every alternative of the pattern and its classes.
CASES = [
    "", "a", " ", "\n", "Hello, world!", "hello world  ", "  leading and trailing  ",
    # contractions, both cases, the long s that (?i:s) also matches, and non-contractions
    "I'm you're we've it's they'll she'd don't", "I'M YOU'RE WE'VE IT'S THEY'LL SHE'D DON'T",
    "We'Ve It'S They'Ll O'Neil rock'n'roll 'tis", "it'\u017f ok", "x'S y'sx 'll", "ABC's DEF'RE", "'s", "''s", "a's's",
    # upper/lower case splits
    "HTTPServer XMLHttpRequest iPhone McDONALD camelCaseWord ALLCAPS lower", "ǅungla ǈ ǋ", "ÀÉÎÕÜ àéîõü ÆØÅ æøå",
    # digits and numbers
    "1 12 123 1234 12345 1234567890", "3.14159 -42 +7 1e10 0x1F", "٣٤٥٦٧ ۱۲۳ १२३४ ①②③ ½¾ Ⅻ 〇一二",
    "abc123def 12ab 9a9", "2024-12-02T05:03:24Z",
    # punctuation runs, newlines, CRLF, tabs
    "!!! ??? ... --- ((( ))) {}[]<>", "end.\n\nnext", "a\r\nb\r\n\r\nc\rd\n", " ;\r\n\r\n", "x = {\n\t\"k\": 1,\n}\n",
    "\t\tindent\ttab", "\t \t \n \n x", "a \n b", "a  \n\n  b", "line   \n", "   \r\n   ", " !", " !!", "  !",
    "\u00a0nbsp\u00a0\u00a0x", "\u3000全角\u3000空白", "\u2028\u2029\x85 sep", "\x0b\x0c vt ff", "\x1c\x1d\x1e\x1f file sep",
    # CJK, Han and its neighbours
    "你好世界，今天天气很好。", "日本語のテキストです。カタカナとひらがな", "人々 時々 〆切", "한국어 텍스트입니다",
    "中文English混合123数字", "漢字\u0301 combining after Han", "⺀⺁⻳ ⼀⼁ radicals", "㐀㐁 \U00020000\U0002A6DF \U0002A700",
    "\U00030000\U0003134A ext G", "\U00031350\U000323AF ext H", "\U0002EBF0\U0002EE5D ext I", "\U000323B0\U00033479 ext J?",
    "\uF900\uFA6D\U0002F800 compat", "\u3005\u3007\u303B", "\U00016FE2\U00016FE3\U00016FF0",
    # scripts with combining marks
    "नमस्ते दुनिया हिन्दी", "مرحبا بالعالم مَرْحَبًا", "สวัสดีครับ ภาษาไทย", "שָׁלוֹם עולם", "Привет, мир! ЁЖИК",
    "Γειά σου Κόσμε ΆΈΉ", "e\u0301 a\u0300\u0301\u0302 \u0301start", "\u0301\u0302", "ÅĀ\u0304\u0323x",
    # emoji, ZWJ, flags, variation selectors
    "👨‍👩‍👧‍👦 family", "🇯🇵🇺🇸 flags", "👍🏽👋🏿", "❤️ ♥︎ ☺", "a😀b 😀😀", "\u200d\u200c\ufe0f zw",
    # specials in text (ordinary unless allowed)
    "<|im_user|>user<|im_middle|>Hi there<|im_end|><|im_assistant|>assistant<|im_middle|>",
    "[BOS]text[EOS] <|reserved_token_0|> <|im_end|x <|im_end|><|im_end|>", "<|<|im_end|>|>", "<|im_sys",
    # private use, unassigned, noncharacters, controls
    "\ue000\U000F0000\U0010FFFD", "\u0378\u0380\U0001FFFE\uFFFF", "\x00\x01\x7f\x80\x9f", "\ufeffBOM",
]

SPECIAL_CASES = [
    "<|im_system|>system<|im_middle|>You are Kimi.<|im_end|><|im_user|>user<|im_middle|>What's 2+2?<|im_end|>",
    "[BOS]a[EOS]b[EOT]", "x<|im_end|>\n\n<|im_end|>  <|im_end|>", "<|im_end|>", "<|im_end|><|im_end|x", "\n<|im_middle|>\n",
]

# Long inputs: (description, [(string, repeat count), ...]), the text being the concatenation. Runs longer than 25,000 characters are cut by tokenization_kimi.py; texts longer
# than 400,000 characters are encoded in chunks whose seams can fall inside a word.
def long_cases():
    return [
        ("spaces 30000 then x", [(" ", 30000), ("x", 1)]),
        ("a 60001", [("a", 60001)]),
        ("newlines 26000", [("\n", 26000), ("end", 1)]),
        ("e-acute 30000 (2-byte characters count once)", [("\u00e9", 30000)]),
        ("Han 27000", [("\u6f22", 27000), (" \u5b57", 1)]),
        ("file separators 30000 (Python isspace, not \\s)", [("\x1c", 30000), ("ab", 1)]),
        ("file separators 20000 then ! 20000 (two runs for isspace, one for \\s)", [("\x1c", 20000), ("!", 20000)]),
        ("nbsp and spaces 25001", [("\u00a0 ", 12500), (" \u00a0x", 1)]),
        ("digits 25003", [("7", 25003)]),
        ("words 400004: a chunk seam inside a word", [("abcdefghij ", 36364)]),
        ("mixed 800010", [("The quick brown fox's 42 jumps!\r\n\t\u6f22\u5b57   ", 20000), ("tail", 1)]),
    ]


def random_strings(seed=1234, count=400, max_len=40):
    """Seeded random strings: scalar values drawn from ASCII, Latin, marks, CJK (incl. extensions), other scripts,
    whitespace, emoji and the whole code space."""
    rng = random.Random(seed)
    pools = [
        (0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
        (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2E80, 0x2FDF), (0x3000, 0x30FF),
        (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0xFE00, 0xFE0F), (0x1F300, 0x1FAFF),
        (0x20000, 0x2A6DF), (0x2B740, 0x2EE5F), (0x30000, 0x323AF), (0x323B0, 0x3347F), (0x0, 0x10FFFF),
    ]
    fixed = [" ", "  ", "\n", "\r\n", "\t", "'", "'s", "'LL", "'re", "123", "\u200d", "\u00a0"]
    out = []
    for _ in range(count):
        n = rng.randint(1, max_len)
        chars = []
        while len(chars) < n:
            if rng.random() < 0.15:
                chars.extend(rng.choice(fixed))
                continue
            lo, hi = rng.choice(pools)
            c = rng.randint(lo, hi)
            if 0xD800 <= c <= 0xDFFF:
                continue
            chars.append(chr(c))
        out.append("".join(chars))
    return out
