#!/usr/bin/env python3
"""Writes corpus.txt: the guard's detector corpus (tests/unit/guard_corpus_test.cc).

One text per line; every span the guard must find is marked
⟦kind|text⟧ (kind: email, phone, credit_card, iban, us_ssn, api_key, or
phrase for the "codename" rule); a line without marks must come out untouched.
Lines starting with '#' are comments. Deterministic (seeded): rerun to
regenerate after editing the templates.
"""
import random

rnd = random.Random(14)
ZW = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
FW = {c: chr(ord(c) + 0xFEE0) for c in "0123456789@.-+()ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}


def mark(kind, text):
    return "\u27e6" + kind + "|" + text + "\u27e7"


def luhn_complete(prefix, length):
    digits = [int(c) for c in prefix]
    while len(digits) < length - 1:
        digits.append(rnd.randrange(10))
    for check in range(10):
        cand = digits + [check]
        s = 0
        for i, d in enumerate(reversed(cand)):
            if i % 2 == 1:
                d = d * 2 - 9 if d * 2 > 9 else d * 2
            s += d
        if s % 10 == 0:
            return "".join(map(str, cand))


def luhn_break(number):
    last = int(number[-1])
    return number[:-1] + str((last + 1) % 10)


def group(s, sizes, sep):
    out, i = [], 0
    for n in sizes:
        out.append(s[i:i + n])
        i += n
    if i < len(s):
        out.append(s[i:])
    return sep.join(p for p in out if p)


IBAN_LEN = {"DE": 22, "GB": 22, "FR": 27, "NL": 18, "ES": 24, "IT": 27, "BE": 16, "CH": 21, "AT": 20, "PL": 28}


def iban(cc):
    n = IBAN_LEN[cc]
    bban = "".join(rnd.choice("0123456789") for _ in range(n - 4))
    if cc in ("GB", "NL"):
        bban = "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)) + bban[4:]
    num = "".join(str(int(c, 36)) for c in bban + cc + "00")
    check = 98 - int(num) % 97
    return cc + "%02d" % check + bban


def spaced4(s):
    return " ".join(s[i:i + 4] for i in range(0, len(s), 4))


def insert_zw(s):
    i = rnd.randrange(1, len(s))
    return s[:i] + rnd.choice(ZW) + s[i:]


def fullwidth(s):
    return "".join(FW.get(c, c) for c in s)


NAMES = ["john.doe", "a.smith", "maria_g", "li.wei", "o'neil", "dev+alerts", "x", "Jean-Luc", "support", "k.tanaka99"]
DOMAINS = ["example.com", "mail.example.org", "corp.example.co.uk", "uni.example.edu", "example.io", "EXAMPLE.NET"]
LEAD = ["Contact {} for details.", "Send it to {} please", "my email is {}", "cc: {};", "Reach me at <{}>.",
        "({}) wrote:", "Email: {}", "forward to {}, thanks", "{} is the owner", "Ping {} when done."]
LEAD_NUM = ["Call me at {}.", "phone: {}", "my number is {} (mobile)", "Tel {}", "reach us on {} today",
            "{} is the office line", "[{}]", "Fax: {};"]
LEAD_CARD = ["card {} exp 12/27", "Pay with {}.", "number: {}", "CC={}", "use card {} please", "{} was declined"]


def emails(out):
    for i in range(60):
        name = rnd.choice(NAMES).replace("'", "")
        addr = name + "@" + rnd.choice(DOMAINS)
        style = i % 6
        if style == 3:
            addr = insert_zw(addr)
        elif style == 4:
            addr = addr.replace("@", "\uff20")
        elif style == 5:
            addr = addr.upper()
        out.append(rnd.choice(LEAD).format(mark("email", addr)))
    for t in ["name at example dot com", "john(at)example(dot)com", "user@localhost is a local account",
              "the @example.com domain", "email me: john at example.com", "a..b@example.com is malformed",
              "foo@bar is not an address", "see https://example.com/@user/posts", "x@example.c0m",
              "Decorators like @app.route are Python", "price@5.99 each", "git@v2.3.1 tag"]:
        out.append(t)


def phones(out):
    nanp = ["({a}) {e}-{l}", "{a}-{e}-{l}", "{a}.{e}.{l}", "{a} {e} {l}", "+1 {a} {e} {l}", "1-{a}-{e}-{l}",
            "+1 ({a}) {e}-{l}", "+1{a}{e}{l}", "+1-{a}-{e}-{l}"]
    for i in range(45):
        a = str(rnd.randrange(2, 10)) + "%02d" % rnd.randrange(100)
        e = str(rnd.randrange(2, 10)) + "%02d" % rnd.randrange(100)
        l = "%04d" % rnd.randrange(10000)
        p = nanp[i % len(nanp)].format(a=a, e=e, l=l)
        if i % 7 == 6:
            p = fullwidth(p)
        out.append(rnd.choice(LEAD_NUM).format(mark("phone", p)))
    intl = ["+44 20 7946 {}", "+33 1 42 68 {} 00", "+49 30 {} 1820", "+81 3-1234-{}", "+61 2 9876 {}",
            "+353 1 234 {}", "+34 912 34 {} 78", "+91 98765 {}1", "+55 11 9{} 4321", "+33 (0)1 42 68 {} 01"]
    for i in range(30):
        p = intl[i % len(intl)].format("%04d" % rnd.randrange(10000))
        out.append(rnd.choice(LEAD_NUM).format(mark("phone", p)))
    for t in ["version 1.2.3 is out", "released 2024-01-15", "meet at 12:30:45", "server 192.168.1.10 is down",
              "ext 555-0199", "room 101-202", "ISBN 978-3-16-148410-0", "score 3-2 after 90 minutes",
              "call 015-555-0199", "id 4155552671", "order #2024-0001-17", "+12 34", "1999-2024 edition",
              "pi is 3.14159265", "coordinates 40.7128, -74.0060", "build 10.0.19045.3803", "v2.10.3-rc1",
              "the range 100-200-300", "Invoice 2023-11-30-0042", "zip 94105-1234"]:
        out.append(t)


def cards(out):
    brands = [("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16), ("35", 16),
              ("4", 13), ("62", 19)]
    for i in range(50):
        prefix, n = brands[i % len(brands)]
        num = luhn_complete(prefix, n)
        style = i % 5
        if n == 15:
            text = group(num, [4, 6, 5], " " if style % 2 else "-")
        elif style == 0:
            text = num
        elif style == 1:
            text = spaced4(num)
        elif style == 2:
            text = group(num, [4, 4, 4, 4], "-")
        elif style == 3:
            text = fullwidth(spaced4(num))
        else:
            text = insert_zw(spaced4(num))
        out.append(rnd.choice(LEAD_CARD).format(mark("credit_card", text)))
    for i in range(25):
        prefix, n = brands[i % len(brands)]
        bad = luhn_break(luhn_complete(prefix, n))
        out.append(rnd.choice(LEAD_CARD).format(spaced4(bad) if i % 2 else bad))
    for t in ["tracking 1Z999AA10123456784", "serial 1234567890123456789012", "0000 0000 0000 0000",
              "order 1234567890123456", "timestamp 1700000000000", "hash 9f86d081884c7d65",
              "phone 4111 1111 1111 1112", "account 12345678 sort 12-34-56"]:
        out.append(t)


def ibans(out):
    ccs = list(IBAN_LEN)
    for i in range(40):
        s = iban(ccs[i % len(ccs)])
        text = spaced4(s) if i % 3 else s
        if i % 8 == 7:
            text = text.lower()
        out.append(rnd.choice(["IBAN: {}", "Please wire to {}.", "account {} (EUR)", "{} is our bank account",
                               "transfer to {} by Friday"]).format(mark("iban", text)))
    for i in range(20):
        s = iban(ccs[i % len(ccs)])
        bad = s[:-1] + str((int(s[-1], 36) + 1) % 10) if s[-1].isdigit() else s[:-1] + "0"
        out.append("IBAN: " + (spaced4(bad) if i % 2 else bad))
    for t in ["DE89 3704 0044 0532 0130", "AB12 hello world", "GB00 WEST 1234 5698 7654 32", "XX82 WEST 1234"]:
        out.append(t)


def ssns(out):
    for i in range(35):
        area = rnd.choice([x for x in range(1, 900) if x != 666])
        g = rnd.randrange(1, 100)
        s = rnd.randrange(1, 10000)
        sep = "-" if i % 3 else " "
        text = "%03d%s%02d%s%04d" % (area, sep, g, sep, s)
        out.append(rnd.choice(["SSN {}", "social security number: {}.", "ssn={}", "My SSN is {}, keep it safe"])
                   .format(mark("us_ssn", text)))
    for t in ["SSN 000-12-3456", "SSN 666-12-3456", "SSN 912-34-5678", "SSN 123-00-4567", "SSN 123-45-0000",
              "part 123-45-67890", "code 123-45 6789", "phone 555-12-3456-7"]:
        out.append(t)


def keys(out):
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    up = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    for i in range(40):
        kind = i % 5
        if kind == 0:
            k = "sk-" + "".join(rnd.choice(alnum) for _ in range(48))
        elif kind == 1:
            k = "sk-proj-" + "".join(rnd.choice(alnum + "-_") for _ in range(60)) + "a1"
        elif kind == 2:
            k = "sk-ant-api03-" + "".join(rnd.choice(alnum + "-_") for _ in range(80)) + "AA"
        elif kind == 3:
            k = "AKIA" + "".join(rnd.choice(up) for _ in range(15)) + "7"
        else:
            k = "ghp_" + "".join(rnd.choice(alnum) for _ in range(35)) + "x"
        out.append(rnd.choice(["export OPENAI_API_KEY={}", "key: {}", "use {} for auth", "token={}&x=1",
                               '"api_key": "{}"']).format(mark("api_key", k)))
    for t in ["sk-short", "the sk-learn package", "sk-this-is-not-a-real-key-at-all", "AKIAshort", "ghp_123",
              "akiaiosfodnn7example", "task-ant-api03-Xb7Yq2Lp9Rt4Mz8Kw1Vn6Hs3Jd5Fg0Ac", "risk-averse investors",
              "desk-top and sk-8 ramps", "ghp_ is the GitHub token prefix"]:
        out.append(t)


def phrases(out):
    forms = ["Project Falcon", "project falcon", "PROJECT FALCON", "project\u200b falcon", "pro\u200bject fal\u200dcon",
             "proj\u00adect falcon", "Project\u00a0Falcon", "\uff30\uff52\uff4f\uff4a\uff45\uff43\uff54 falcon",
             "Pr\u043eject F\u0430lcon", "\u03a1roject Falcon", "project falcon", "Falcon-9 launch code",
             "falcon-9 LAUNCH code", "Falcon\u20119 launch code"]
    for i, f in enumerate(forms * 2):
        out.append(rnd.choice(["The {} is on schedule.", "Do not mention {} to anyone", "{}: status green",
                               "Notes about {}, draft 2"]).format(mark("phrase", f)))
    for t in ["the falcon project", "project falco", "a falcon flew over the project site", "Falcon 9 launched",
              "project-falcon", "projectfalcon"]:
        out.append(t)


def mixed(out):
    for i in range(30):
        e = rnd.choice(NAMES).replace("'", "") + "@" + rnd.choice(DOMAINS)
        c = spaced4(luhn_complete("4", 16))
        s = "%03d-%02d-%04d" % (rnd.randrange(1, 600), rnd.randrange(1, 100), rnd.randrange(1, 10000))
        out.append("Customer {} paid with {} and gave SSN {}; see ticket 2024-05-0{}.".format(
            mark("email", e), mark("credit_card", c), mark("us_ssn", s), i % 10))
    plain = ["The quick brown fox jumps over the lazy dog.", "Meeting moved to 3pm, room 4B.",
             "Prices rose 2.5% in Q3 2024.", "Use Python 3.11.4 or newer.", "She scored 98/100 on the test.",
             "Chapter 12, verses 1-3.", "Flight UA 1234 departs at 07:45.", "Temperature 21.5 C, humidity 40%.",
             "Released under the MIT license (c) 2019-2024.", "Apartment 5-12, floor 3.",
             "x = y * 2 + 10 - 4 / 2", "The year 1984 was a novel.", "route 66 and highway 101",
             "Patch notes for 4.2.0: fixed 17 bugs.", "UUID 123e4567-e89b-12d3-a456-426614174000",
             "SHA 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12", "matrix [[1, 2], [3, 4]]", "10,000,000 downloads",
             "ratio 16:9 at 1920x1080", "call me maybe", "the number 42", "2 + 2 = 4", "see section 3.4.5.6",
             "Invoice INV-2024-000123", "lat 51.5074 lon -0.1278", "IPv6 fe80::1ff:fe23:4567:890a",
             "Postcode SW1A 1AA", "backup at 02:00 on 2024-12-31T23:59:59Z", "tel. (no number given)",
             "http://example.com/path?x=1&y=2"]
    out.extend(plain)


def main():
    out = []
    for f in (emails, phones, cards, ibans, ssns, keys, phrases, mixed):
        out.append("# " + f.__name__)
        f(out)
    with open("corpus.txt", "w", encoding="utf-8") as fh:
        for line in out:
            assert "\n" not in line
            fh.write(line + "\n")


if __name__ == "__main__":
    main()
