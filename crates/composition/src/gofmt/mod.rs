//! Go `fmt.Sprintf` over JSON values, as upstream's Format transform and string combine
//! strategy use it.
//!
//! JSON values are seen as the Go types Kubernetes' JSON decoder yields: `nil`, `bool`,
//! `int64` (integers that fit), `float64`, `string`, `map[string]interface {}` and
//! `[]interface {}`. Supported: the flags `+ - # 0 space`, width and precision (also
//! `*`), explicit argument indexes (`%[2]s`), and the verbs `%v %s %d %t %q %x %X %o %O
//! %b %c %U %e %E %f %F %g %G %T %%`, with Go's error notation for wrong verbs
//! (`%!d(string=foo)`), missing arguments (`%!s(MISSING)`) and extra ones
//! (`%!(EXTRA int64=1)`). Maps print with sorted keys, as Go does. Not supported: `%p`
//! and hexadecimal float formats (`%x` of a float), which print as wrong verbs.

mod number;
mod print;

pub use print::{quote, type_name};

use serde_json::Value;

/// Formatting flags, width and precision of one verb.
#[derive(Debug, Clone, Copy, Default)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    /// `%+v`.
    plus_v: bool,
    /// `%#v`.
    sharp_v: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// `fmt.Sprintf(format, args...)`.
pub fn sprintf(format: &str, args: &[&Value]) -> String {
    let mut p = Printer {
        out: String::new(),
        args,
        arg_num: 0,
        reordered: false,
    };
    let mut rest = format;
    while !rest.is_empty() {
        let Some(pct) = rest.find('%') else {
            p.out.push_str(rest);
            break;
        };
        p.out.push_str(rest.get(..pct).unwrap_or_default());
        match p.directive(rest.get(pct + 1..).unwrap_or_default()) {
            Some(after) => rest = after,
            None => break,
        }
    }
    p.extra();
    p.out
}

/// One [`sprintf`] in progress (Go's `pp`): the output so far, the arguments and the next one.
struct Printer<'a> {
    out: String,
    args: &'a [&'a Value],
    arg_num: usize,
    /// Whether an explicit argument index was seen (then extra arguments are no error).
    reordered: bool,
}

/// Where a directive stands with explicit argument indexes (Go's `goodArgNum`, `afterIndex`).
#[derive(Debug, Clone, Copy)]
struct Index {
    /// No bad index so far.
    good: bool,
    /// An index came last.
    after: bool,
}

impl Printer<'_> {
    /// Prints one directive, `s` being what follows its `%`. Returns what follows its verb, or
    /// `None` when the format ends before a verb.
    fn directive<'f>(&mut self, s: &'f str) -> Option<&'f str> {
        let (mut spec, s) = flags(s);
        let mut index = Index {
            good: true,
            after: false,
        };
        let s = self.arg_index(s, &mut index);
        let s = self.width(&mut spec, s, &mut index);
        let mut s = self.precision(&mut spec, s, &mut index);
        if !index.after {
            s = self.arg_index(s, &mut index);
        }
        let Some(verb) = s.chars().next() else {
            self.out.push_str("%!(NOVERB)");
            return None;
        };
        self.verb(verb, spec, index.good);
        Some(s.get(verb.len_utf8()..).unwrap_or_default())
    }

    /// Takes an explicit argument index `[n]` at the start of `s`, if there is one.
    fn arg_index<'f>(&mut self, s: &'f str, index: &mut Index) -> &'f str {
        let (arg_num, s, after) = arg_number(
            self.arg_num,
            s,
            self.args.len(),
            &mut self.reordered,
            &mut index.good,
        );
        self.arg_num = arg_num;
        index.after = after;
        s
    }

    /// Takes a width (a number, or `*` for an argument) at the start of `s`.
    fn width<'f>(&mut self, spec: &mut Spec, s: &'f str, index: &mut Index) -> &'f str {
        if let Some(after) = s.strip_prefix('*') {
            match int_arg(self.args, &mut self.arg_num) {
                Some(w) if w < 0 => {
                    spec.minus = true;
                    spec.zero = false;
                    spec.width = Some(w.unsigned_abs() as usize);
                }
                Some(w) => spec.width = Some(w as usize),
                None => self.out.push_str("%!(BADWIDTH)"),
            }
            index.after = false;
            return after;
        }
        let (n, after) = parse_num(s);
        if let Some(n) = n {
            spec.width = Some(n);
            if index.after {
                // "%[3]2d" is bad: an index must come right before the verb.
                index.good = false;
            }
        }
        after
    }

    /// Takes a precision (`.` and a number, or `.*` for an argument) at the start of `s`.
    fn precision<'f>(&mut self, spec: &mut Spec, s: &'f str, index: &mut Index) -> &'f str {
        let Some(s) = s.strip_prefix('.') else {
            return s;
        };
        if index.after {
            index.good = false;
        }
        let s = self.arg_index(s, index);
        if let Some(after) = s.strip_prefix('*') {
            match int_arg(self.args, &mut self.arg_num) {
                Some(p) if p < 0 => spec.prec = None,
                Some(p) => spec.prec = Some(p as usize),
                None => self.out.push_str("%!(BADPREC)"),
            }
            index.after = false;
            return after;
        }
        let (n, after) = parse_num(s);
        spec.prec = Some(n.unwrap_or(0));
        after
    }

    /// Prints `verb` of the next argument (`good`: no bad argument index).
    fn verb(&mut self, verb: char, mut spec: Spec, good: bool) {
        if verb == '%' {
            self.out.push('%');
            return;
        }
        if !good {
            self.out.push_str(&format!("%!{verb}(BADINDEX)"));
            return;
        }
        let Some(arg) = self.args.get(self.arg_num) else {
            self.out.push_str(&format!("%!{verb}(MISSING)"));
            return;
        };
        if verb == 'v' {
            if spec.sharp {
                spec.sharp = false;
                spec.sharp_v = true;
            }
            if spec.plus {
                spec.plus = false;
                spec.plus_v = true;
            }
        }
        print::print_arg(&mut self.out, &spec, arg, verb);
        self.arg_num += 1;
    }

    /// Go's `%!(EXTRA type=value, ...)` for arguments no verb used (unless indexes reordered them).
    fn extra(&mut self) {
        if self.reordered || self.arg_num >= self.args.len() {
            return;
        }
        self.out.push_str("%!(EXTRA ");
        let spec = Spec::default();
        for (i, arg) in self.args.iter().skip(self.arg_num).enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            if arg.is_null() {
                self.out.push_str("<nil>");
            } else {
                self.out.push_str(type_name(arg));
                self.out.push('=');
                print::print_arg(&mut self.out, &spec, arg, 'v');
            }
        }
        self.out.push(')');
    }
}

/// The flags at the start of `s`.
fn flags(mut s: &str) -> (Spec, &str) {
    let mut spec = Spec::default();
    loop {
        match s.chars().next() {
            Some('#') => spec.sharp = true,
            Some('0') => spec.zero = !spec.minus,
            Some('+') => spec.plus = true,
            Some('-') => {
                spec.minus = true;
                spec.zero = false;
            }
            Some(' ') => spec.space = true,
            _ => break,
        }
        s = s.get(1..).unwrap_or_default();
    }
    (spec, s)
}

/// `fmt.Sprintf("%v", v)`.
pub fn sprint_v(v: &Value) -> String {
    let mut out = String::new();
    print::print_arg(&mut out, &Spec::default(), v, 'v');
    out
}

/// Parses a decimal number at the start of `s`, as Go's `parsenum` (at most 1e6).
fn parse_num(s: &str) -> (Option<usize>, &str) {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return (None, s);
    }
    let rest = s.get(digits..).unwrap_or_default();
    let n = s
        .get(..digits)
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|n| *n <= 1_000_000);
    (n, rest)
}

/// Handles an explicit argument index `[n]` at the start of `s`.
fn arg_number<'s>(
    arg_num: usize,
    s: &'s str,
    num_args: usize,
    reordered: &mut bool,
    good: &mut bool,
) -> (usize, &'s str, bool) {
    if !s.starts_with('[') {
        return (arg_num, s, false);
    }
    *reordered = true;
    let Some(close) = s.find(']') else {
        *good = false;
        return (arg_num, s.get(1..).unwrap_or_default(), false);
    };
    let rest = s.get(close + 1..).unwrap_or_default();
    let inner = s.get(1..close).unwrap_or_default();
    let (n, after) = parse_num(inner);
    match n {
        Some(n) if after.is_empty() && n >= 1 && n <= num_args => (n - 1, rest, true),
        Some(_) if after.is_empty() => {
            *good = false;
            (arg_num, rest, true)
        }
        _ => {
            *good = false;
            (arg_num, rest, false)
        }
    }
}

/// Takes an integer argument for `*` width or precision.
fn int_arg(args: &[&Value], arg_num: &mut usize) -> Option<i64> {
    let arg = args.get(*arg_num)?;
    *arg_num += 1;
    arg.as_i64().filter(|n| n.unsigned_abs() <= 1_000_000)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(format: &str, args: &[Value]) -> String {
        let refs: Vec<&Value> = args.iter().collect();
        sprintf(format, &refs)
    }

    // Go fmt documentation: verbs, flags, widths, and the error notation.
    #[test]
    fn basic_verbs() {
        assert_eq!(f("the-field-%s", &[json!("field1")]), "the-field-field1");
        assert_eq!(f("%d-%s", &[json!(7), json!("x")]), "7-x");
        assert_eq!(
            f("%v %v %v", &[json!(true), json!(1.5), json!(null)]),
            "true 1.5 <nil>"
        );
        assert_eq!(f("%t", &[json!(false)]), "false");
        assert_eq!(f("%q", &[json!("a\"b\n")]), "\"a\\\"b\\n\"");
        assert_eq!(
            f("%x %X %o %b", &[json!(255), json!(255), json!(8), json!(5)]),
            "ff FF 10 101"
        );
        assert_eq!(f("%x", &[json!("hi")]), "6869");
        assert_eq!(f("%c%U", &[json!(65), json!(65)]), "AU+0041");
        assert_eq!(f("100%%", &[]), "100%");
        assert_eq!(
            f("%T %T %T", &[json!({}), json!([]), json!("s")]),
            "map[string]interface {} []interface {} string"
        );
    }

    #[test]
    fn widths_and_precision() {
        assert_eq!(
            f("[%5s][%-5s][%.2s]", &[json!("ab"), json!("ab"), json!("abc")]),
            "[   ab][ab   ][ab]"
        );
        assert_eq!(
            f(
                "[%05d][%+d][% d][%.3d]",
                &[json!(-5), json!(5), json!(5), json!(7)]
            ),
            "[-0005][+5][ 5][007]"
        );
        assert_eq!(
            f("%*d|%-*d|", &[json!(3), json!(1), json!(3), json!(2)]),
            "  1|2  |"
        );
        assert_eq!(
            f(
                "%.2f %8.3f %e %E",
                &[json!(1.23456), json!(2.5), json!(1234.5678), json!(0.5)]
            ),
            "1.23    2.500 1.234568e+03 5.000000E-01"
        );
        assert_eq!(
            f(
                "%g %g %.3g %G",
                &[json!(100000.0), json!(1000000.0), json!(1.23456), json!(1e-7)]
            ),
            "100000 1e+06 1.23 1E-07"
        );
        assert_eq!(f("%06.2f", &[json!(-1.5)]), "-01.50");
    }

    #[test]
    fn floats_print_like_go() {
        for (v, want) in [
            (json!(1.5), "1.5"),
            (json!(123456.0), "123456"),
            (json!(1234567.0), "1.234567e+06"),
            (json!(0.0001), "0.0001"),
            (json!(0.00001), "1e-05"),
            (json!(-2.25), "-2.25"),
            (json!(1e21), "1e+21"),
            (json!(0.0), "0"),
        ] {
            assert_eq!(sprint_v(&v), want, "{v}");
        }
    }

    #[test]
    fn composites_print_like_go() {
        let v = json!({"b": [1, "x", null], "a": {"c": true}});
        assert_eq!(sprint_v(&v), "map[a:map[c:true] b:[1 x <nil>]]");
        assert_eq!(f("%s", &[json!(["a", 1])]), "[a %!s(int64=1)]");
        assert_eq!(
            f("%#v", &[json!({"a": "x", "b": [1]})]),
            "map[string]interface {}{\"a\":\"x\", \"b\":[]interface {}{1}}"
        );
        assert_eq!(f("%#v %#v", &[json!("s"), json!(null)]), "\"s\" <nil>");
    }

    #[test]
    fn errors_in_go_notation() {
        assert_eq!(f("%d", &[json!("foo")]), "%!d(string=foo)");
        assert_eq!(f("%s", &[json!(5)]), "%!s(int64=5)");
        assert_eq!(f("%d", &[json!(1.5)]), "%!d(float64=1.5)");
        assert_eq!(f("%s", &[json!(null)]), "%!s(<nil>)");
        assert_eq!(f("%s-%s", &[json!("a")]), "a-%!s(MISSING)");
        assert_eq!(
            f("%s", &[json!("a"), json!(1), json!(null)]),
            "a%!(EXTRA int64=1, <nil>)"
        );
        assert_eq!(f("%z", &[json!(1)]), "%!z(int64=1)");
        assert_eq!(f("%", &[]), "%!(NOVERB)");
        assert_eq!(f("%[2]s-%[1]s", &[json!("a"), json!("b")]), "b-a");
        assert_eq!(f("%[3]s", &[json!("a")]), "%!s(BADINDEX)");
    }
}
