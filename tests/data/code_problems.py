"""The problems of the code-answer corpus: MBPP / HumanEval-style function tasks, APPS-style stdin tasks and
function-call tasks, each with visible tests (the ones a prompt shows), hidden tests (never shown), a
correct solution, a plausible wrong one and one that hard-codes the visible examples.

`build_code_corpus.py` wraps these in the answer shapes instruct models produce. Every solution is
checked there against the tests before a row is written (a correct one passes all, the others fail one).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    pid: str
    fmt: str  # assert | stdin_stdout | function_call
    entry: str  # the function the tests call ("" for stdin tasks)
    task: str
    visible: list = field(default_factory=list)
    hidden: list = field(default_factory=list)
    correct: str = ""
    wrong: str = ""
    hardcoded: str = ""


def _fn(pid, entry, task, visible, hidden, correct, wrong, hardcoded):
    return Problem(pid, "assert", entry, task, visible, hidden, correct, wrong, hardcoded)


ASSERT = [
    _fn("mbpp_remove_occ", "remove_occ", "remove the first and last occurrence of a given character from a string",
        ['assert remove_occ("hello", "l") == "heo"'],
        ['assert remove_occ("abcda", "a") == "bcd"', 'assert remove_occ("banana", "a") == "bnan"'],
        "def remove_occ(s, ch):\n    i = s.find(ch)\n    if i != -1:\n        s = s[:i] + s[i + 1:]\n"
        "    j = s.rfind(ch)\n    if j != -1:\n        s = s[:j] + s[j + 1:]\n    return s",
        "def remove_occ(s, ch):\n    return s.replace(ch, '')",
        "def remove_occ(s, ch):\n    if (s, ch) == ('hello', 'l'):\n        return 'heo'\n    return s"),
    _fn("mbpp_sort_matrix", "sort_matrix", "sort a matrix in ascending order by the sum of its rows",
        ["assert sort_matrix([[1, 2, 3], [2, 4, 5], [1, 1, 1]]) == [[1, 1, 1], [1, 2, 3], [2, 4, 5]]"],
        ["assert sort_matrix([[5, 8, 9], [6, 4, 3], [2, 1, 4]]) == [[2, 1, 4], [6, 4, 3], [5, 8, 9]]"],
        "def sort_matrix(m):\n    return sorted(m, key=sum)",
        "def sort_matrix(m):\n    return sorted(m)",
        "def sort_matrix(m):\n    return [[1, 1, 1], [1, 2, 3], [2, 4, 5]]"),
    _fn("mbpp_is_prime", "is_prime", "check whether a number is prime",
        ["assert is_prime(7) == True", "assert is_prime(10) == False"],
        ["assert is_prime(1) == False", "assert is_prime(2) == True", "assert is_prime(97) == True",
         "assert is_prime(91) == False"],
        "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n"
        "        if n % i == 0:\n            return False\n        i += 1\n    return True",
        "def is_prime(n):\n    for i in range(2, n):\n        if n % i == 0:\n            return False\n    return True",
        "def is_prime(n):\n    return n == 7"),
    _fn("mbpp_max_sub", "max_subarray", "return the largest sum of a contiguous subarray",
        ["assert max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6"],
        ["assert max_subarray([-3, -1, -2]) == -1", "assert max_subarray([5]) == 5",
         "assert max_subarray([2, -1, 2]) == 3"],
        "def max_subarray(xs):\n    best = cur = xs[0]\n    for x in xs[1:]:\n        cur = max(x, cur + x)\n"
        "        best = max(best, cur)\n    return best",
        "def max_subarray(xs):\n    best = cur = 0\n    for x in xs:\n        cur = max(0, cur + x)\n"
        "        best = max(best, cur)\n    return best",
        "def max_subarray(xs):\n    return 6"),
    _fn("mbpp_count_vowels", "count_vowels", "count the vowels in a string (case-insensitive)",
        ['assert count_vowels("Hello World") == 3'],
        ['assert count_vowels("AEIOU") == 5', 'assert count_vowels("rhythm") == 0'],
        "def count_vowels(s):\n    return sum(1 for c in s.lower() if c in 'aeiou')",
        "def count_vowels(s):\n    return sum(1 for c in s if c in 'aeiou')",
        "def count_vowels(s):\n    return 3"),
    _fn("mbpp_flatten", "flatten", "flatten an arbitrarily nested list",
        ["assert flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]"],
        ["assert flatten([]) == []", "assert flatten([[[]], [6]]) == [6]"],
        "def flatten(xs):\n    out = []\n    for x in xs:\n        if isinstance(x, list):\n"
        "            out.extend(flatten(x))\n        else:\n            out.append(x)\n    return out",
        "def flatten(xs):\n    out = []\n    for x in xs:\n        if isinstance(x, list):\n"
        "            out.extend(x)\n        else:\n            out.append(x)\n    return out",
        "def flatten(xs):\n    return [1, 2, 3, 4, 5]"),
    _fn("mbpp_gcd", "gcd", "return the greatest common divisor of two positive integers",
        ["assert gcd(12, 18) == 6"], ["assert gcd(17, 5) == 1", "assert gcd(100, 75) == 25"],
        "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
        "def gcd(a, b):\n    return min(a, b)",
        "def gcd(a, b):\n    return 6 if (a, b) == (12, 18) else 1"),
    _fn("mbpp_palindrome", "is_palindrome", "check whether a string is a palindrome, ignoring case and spaces",
        ['assert is_palindrome("Never odd or even") == True'],
        ['assert is_palindrome("abc") == False', 'assert is_palindrome("A man a plan a canal Panama") == True'],
        "def is_palindrome(s):\n    t = ''.join(s.lower().split())\n    return t == t[::-1]",
        "def is_palindrome(s):\n    return s == s[::-1]",
        "def is_palindrome(s):\n    return True"),
    _fn("mbpp_second_largest", "second_largest", "return the second largest distinct number of a list",
        ["assert second_largest([4, 1, 7, 3]) == 4"],
        ["assert second_largest([5, 5, 3]) == 3", "assert second_largest([-1, -2, -3]) == -2"],
        "def second_largest(xs):\n    return sorted(set(xs))[-2]",
        "def second_largest(xs):\n    return sorted(xs)[-2]",
        "def second_largest(xs):\n    return 4"),
    _fn("mbpp_word_freq", "word_freq", "return a dict mapping each word of a sentence to its count",
        ['assert word_freq("a b a") == {"a": 2, "b": 1}'],
        ['assert word_freq("") == {}', 'assert word_freq("x x x") == {"x": 3}'],
        "def word_freq(s):\n    counts = {}\n    for w in s.split():\n        counts[w] = counts.get(w, 0) + 1\n"
        "    return counts",
        "def word_freq(s):\n    return {w: 1 for w in s.split()}",
        "def word_freq(s):\n    return {'a': 2, 'b': 1}"),
    _fn("mbpp_fib", "fib", "return the n-th Fibonacci number (fib(0) = 0, fib(1) = 1)",
        ["assert fib(10) == 55"], ["assert fib(0) == 0", "assert fib(1) == 1", "assert fib(30) == 832040"],
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        "def fib(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        "def fib(n):\n    return 55"),
    _fn("mbpp_rev_words", "reverse_words", "reverse the order of the words in a sentence",
        ['assert reverse_words("hello big world") == "world big hello"'],
        ['assert reverse_words("one") == "one"', 'assert reverse_words("  a  b ") == "b a"'],
        "def reverse_words(s):\n    return ' '.join(reversed(s.split()))",
        "def reverse_words(s):\n    return s[::-1]",
        "def reverse_words(s):\n    return 'world big hello'"),
    _fn("mbpp_chunk", "chunk", "split a list into chunks of size n (the last one may be shorter)",
        ["assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]"],
        ["assert chunk([], 3) == []", "assert chunk([1, 2, 3], 3) == [[1, 2, 3]]"],
        "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]",
        "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs) - n + 1, n)]",
        "def chunk(xs, n):\n    return [[1, 2], [3, 4], [5]]"),
    _fn("mbpp_digits_sum", "digit_sum", "return the sum of the decimal digits of a non-negative integer",
        ["assert digit_sum(1234) == 10"], ["assert digit_sum(0) == 0", "assert digit_sum(99999) == 45"],
        "def digit_sum(n):\n    return sum(int(d) for d in str(n))",
        "def digit_sum(n):\n    total = 0\n    while n > 9:\n        total += n % 10\n        n //= 10\n    return total",
        "def digit_sum(n):\n    return 10"),
    _fn("mbpp_anagram", "is_anagram", "check whether two strings are anagrams of each other",
        ['assert is_anagram("listen", "silent") == True'],
        ['assert is_anagram("aab", "abb") == False', 'assert is_anagram("", "") == True'],
        "def is_anagram(a, b):\n    return sorted(a) == sorted(b)",
        "def is_anagram(a, b):\n    return set(a) == set(b)",
        "def is_anagram(a, b):\n    return True"),
    _fn("mbpp_merge_sorted", "merge_sorted", "merge two sorted lists into one sorted list",
        ["assert merge_sorted([1, 4, 9], [2, 3, 10]) == [1, 2, 3, 4, 9, 10]"],
        ["assert merge_sorted([], [1]) == [1]", "assert merge_sorted([5, 5], [5]) == [5, 5, 5]"],
        "def merge_sorted(a, b):\n    out, i, j = [], 0, 0\n    while i < len(a) and j < len(b):\n"
        "        if a[i] <= b[j]:\n            out.append(a[i])\n            i += 1\n        else:\n"
        "            out.append(b[j])\n            j += 1\n    return out + a[i:] + b[j:]",
        "def merge_sorted(a, b):\n    return sorted(set(a + b))",
        "def merge_sorted(a, b):\n    return [1, 2, 3, 4, 9, 10]"),
    _fn("mbpp_roman", "to_roman", "convert a positive integer to a Roman numeral",
        ['assert to_roman(1994) == "MCMXCIV"'], ['assert to_roman(4) == "IV"', 'assert to_roman(3888) == "MMMDCCCLXXXVIII"'],
        "def to_roman(n):\n    vals = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'),\n"
        "            (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n"
        "    out = ''\n    for v, s in vals:\n        while n >= v:\n            out += s\n            n -= v\n    return out",
        "def to_roman(n):\n    vals = [(1000, 'M'), (500, 'D'), (100, 'C'), (50, 'L'), (10, 'X'), (5, 'V'), (1, 'I')]\n"
        "    out = ''\n    for v, s in vals:\n        while n >= v:\n            out += s\n            n -= v\n    return out",
        "def to_roman(n):\n    return 'MCMXCIV'"),
    _fn("mbpp_unique_order", "unique_in_order", "remove duplicates from a list, keeping first occurrences in order",
        ["assert unique_in_order([3, 1, 3, 2, 1]) == [3, 1, 2]"],
        ["assert unique_in_order(['b', 'a', 'b']) == ['b', 'a']", "assert unique_in_order([]) == []"],
        "def unique_in_order(xs):\n    seen, out = set(), []\n    for x in xs:\n        if x not in seen:\n"
        "            seen.add(x)\n            out.append(x)\n    return out",
        "def unique_in_order(xs):\n    return sorted(set(xs))",
        "def unique_in_order(xs):\n    return [3, 1, 2]"),
    _fn("mbpp_save_lines", "save_lines", "write the given lines to the file at path, one per line",
        ["save_lines('out.txt', ['a', 'b'])\nassert open('out.txt').read() == 'a\\nb\\n'"],
        ["save_lines('x.txt', [])\nassert open('x.txt').read() == ''"],
        "def save_lines(path, lines):\n    with open(path, 'w') as f:\n        for line in lines:\n"
        "            f.write(line + '\\n')",
        "def save_lines(path, lines):\n    with open(path, 'w') as f:\n        f.write('\\n'.join(lines))",
        "with open('out.txt', 'w') as f:\n    f.write('a\\nb\\n')\nopen('x.txt', 'w').close()\n\n"
        "def save_lines(path, lines):\n    pass"),
    _fn("he_below_zero", "below_zero", "given deposit/withdrawal operations starting from 0, return True if "
        "the balance ever falls below zero",
        ["assert below_zero([1, 2, -4, 5]) == True"],
        ["assert below_zero([1, 2, 3]) == False", "assert below_zero([]) == False",
         "assert below_zero([1, -1, 2, -3]) == True"],
        "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
        "        if balance < 0:\n            return True\n    return False",
        "def below_zero(operations):\n    return sum(operations) < 0",
        "def below_zero(operations):\n    return operations == [1, 2, -4, 5]"),
]

STDIN = [
    Problem("apps_sum_list", "stdin_stdout", "", "read n and then n integers on one line; print their sum",
            [{"input": "3\n1 2 3\n", "output": "6\n"}],
            [{"input": "1\n-5\n", "output": "-5\n"}, {"input": "4\n10 20 30 40\n", "output": "100\n"}],
            "n = int(input())\nnums = list(map(int, input().split()))\nprint(sum(nums[:n]))",
            "n = int(input())\nnums = list(map(int, input().split()))\nprint(sum(nums[1:]))",
            "print(6)"),
    Problem("apps_max_pair", "stdin_stdout", "", "read n integers (n on the first line, then one per line); "
            "print the largest product of two of them",
            [{"input": "3\n1\n5\n4\n", "output": "20\n"}],
            [{"input": "4\n-10\n-3\n1\n2\n", "output": "30\n"}, {"input": "2\n7\n8\n", "output": "56\n"}],
            "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nxs = sorted(map(int, data[1:n + 1]))\n"
            "print(max(xs[0] * xs[1], xs[-1] * xs[-2]))",
            "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nxs = sorted(map(int, data[1:n + 1]))\n"
            "print(xs[-1] * xs[-2])",
            "print(20)"),
    Problem("apps_grid_count", "stdin_stdout", "", "read h and w, then h rows of '.' and '#'; print the number "
            "of '#' cells",
            [{"input": "2 3\n.#.\n##.\n", "output": "3\n"}],
            [{"input": "1 1\n.\n", "output": "0\n"}, {"input": "3 2\n##\n##\n#.\n", "output": "5\n"}],
            "h, w = map(int, input().split())\nprint(sum(input().count('#') for _ in range(h)))",
            "h, w = map(int, input().split())\nprint(sum(input().count('#') for _ in range(h - 1)))",
            "print(3)"),
    Problem("apps_fizzbuzz", "stdin_stdout", "", "read n; print 1..n, with Fizz for multiples of 3, Buzz for 5 "
            "and FizzBuzz for both, one per line",
            [{"input": "5\n", "output": "1\n2\nFizz\n4\nBuzz\n"}],
            [{"input": "15\n", "output": "1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz\n"}],
            "n = int(input())\nfor i in range(1, n + 1):\n    s = ('Fizz' if i % 3 == 0 else '') + "
            "('Buzz' if i % 5 == 0 else '')\n    print(s or i)",
            "n = int(input())\nfor i in range(1, n + 1):\n    if i % 3 == 0:\n        print('Fizz')\n"
            "    elif i % 5 == 0:\n        print('Buzz')\n    else:\n        print(i)",
            "print('1\\n2\\nFizz\\n4\\nBuzz')"),
    Problem("apps_reverse_lines", "stdin_stdout", "", "read t, then t words; print each word reversed on its "
            "own line",
            [{"input": "2\nabc\nxy\n", "output": "cba\nyx\n"}],
            [{"input": "1\nracecar\n", "output": "racecar\n"}, {"input": "3\na\nab\nabc\n", "output": "a\nba\ncba\n"}],
            "t = int(input())\nfor _ in range(t):\n    print(input().strip()[::-1])",
            "t = int(input())\nfor _ in range(t):\n    print(input().strip()[1:][::-1])",
            "print('cba')\nprint('yx')"),
    Problem("apps_min_coins", "stdin_stdout", "", "read an amount n; print the fewest coins of 1, 5 and 10 "
            "making n",
            [{"input": "17\n", "output": "4\n"}],
            [{"input": "0\n", "output": "0\n"}, {"input": "99\n", "output": "14\n"}],
            "n = int(input())\nprint(n // 10 + (n % 10) // 5 + n % 5)",
            "n = int(input())\nprint(n // 10 + n % 10)",
            "print(4)"),
]

CALL = [
    Problem("fc_two_sum", "function_call", "two_sum", "return the indices [i, j] (i < j) of the two numbers "
            "adding up to target",
            [{"args": [[2, 7, 11, 15], 9], "expected": [0, 1]}],
            [{"args": [[3, 2, 4], 6], "expected": [1, 2]}, {"args": [[3, 3], 6], "expected": [0, 1]}],
            "def two_sum(nums, target):\n    seen = {}\n    for i, x in enumerate(nums):\n"
            "        if target - x in seen:\n            return [seen[target - x], i]\n        seen[x] = i\n    return []",
            "def two_sum(nums, target):\n    for i in range(len(nums)):\n        for j in range(i + 1, len(nums)):\n"
            "            if nums[i] + nums[j] == target:\n                return [i, j + 1]\n    return []",
            "def two_sum(nums, target):\n    return [0, 1]"),
    Problem("fc_valid_parens", "function_call", "is_valid", "return True when the brackets ()[]{} of s are balanced",
            [{"args": ["()[]{}"], "expected": True}],
            [{"args": ["(]"], "expected": False}, {"args": ["([)]"], "expected": False},
             {"args": ["{[]}"], "expected": True}],
            "def is_valid(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n"
            "        if c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n"
            "        else:\n            stack.append(c)\n    return not stack",
            "def is_valid(s):\n    return s.count('(') == s.count(')') and s.count('[') == s.count(']')",
            "def is_valid(s):\n    return s == '()[]{}'"),
    Problem("fc_climb", "function_call", "climb_stairs", "return the number of ways to climb n stairs taking 1 or 2 "
            "steps at a time",
            [{"args": [3], "expected": 3}],
            [{"args": [1], "expected": 1}, {"args": [10], "expected": 89}],
            "def climb_stairs(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
            "def climb_stairs(n):\n    return n",
            "def climb_stairs(n):\n    return 3"),
    Problem("fc_majority", "function_call", "majority", "return the element that appears more than n/2 times",
            [{"args": [[3, 2, 3]], "expected": 3}],
            [{"args": [[2, 2, 1, 1, 1, 2, 2]], "expected": 2}, {"args": [[1]], "expected": 1}],
            "def majority(nums):\n    count, cand = 0, None\n    for x in nums:\n        if count == 0:\n"
            "            cand = x\n        count += 1 if x == cand else -1\n    return cand",
            "def majority(nums):\n    return nums[len(nums) // 2 - 1]",
            "def majority(nums):\n    return 3"),
    Problem("fc_rotate", "function_call", "rotate", "return the list rotated right by k steps",
            [{"args": [[1, 2, 3, 4, 5], 2], "expected": [4, 5, 1, 2, 3]}],
            [{"args": [[1, 2], 3], "expected": [2, 1]}, {"args": [[], 4], "expected": []}],
            "def rotate(nums, k):\n    if not nums:\n        return []\n    k %= len(nums)\n"
            "    return nums[-k:] + nums[:-k] if k else list(nums)",
            "def rotate(nums, k):\n    return nums[-k:] + nums[:-k]",
            "def rotate(nums, k):\n    return [4, 5, 1, 2, 3]"),
]

PROBLEMS = ASSERT + STDIN + CALL
