//! `docs/benchmarks.svg`: the leadership timeline and the handover latencies.

use std::fmt::Write as _;

use super::Results;
use super::candidate::Bar;
use super::plan::{CROSSPLANE, DEFAULTS, Imp};
use super::stats::pct;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A Gantt chart of leadership per replica slot over the run, and a strip plot of handover latencies
/// on a log scale.
pub(super) fn svg(r: &Results, bars: &[Bar], t0: i64, t1: i64) -> String {
    let mut rows: Vec<(String, Imp)> = Vec::new();
    for b in bars {
        if !rows.iter().any(|(r, _)| *r == b.row) {
            rows.push((b.row.clone(), b.imp));
        }
    }
    let width = 1100.0;
    let left = 260.0;
    let plot_w = width - left - 30.0;
    let row_h = 16.0;
    let top = 50.0;
    let gantt_h = rows.len() as f64 * row_h;
    let span = ((t1 - t0).max(1)) as f64;
    let x_of = |t: i64| left + ((t - t0) as f64 / span) * plot_w;

    let strips: Vec<(String, Imp, Vec<f64>)> = {
        let mut v = Vec::new();
        for (kind, map) in [("graceful", &r.graceful), ("crash", &r.crash)] {
            for t in [DEFAULTS, CROSSPLANE] {
                for imp in [Imp::Rust, Imp::Go] {
                    if let Some(x) = map.get(&(imp, t.tag())) {
                        v.push((format!("{} {kind} {}", imp.name(), t.label()), imp, x.clone()));
                    }
                }
            }
        }
        for (imp, m) in &r.many {
            v.push((
                format!("{} many-candidate handover", imp.name()),
                *imp,
                m.handovers.clone(),
            ));
        }
        v
    };
    let strip_top = top + gantt_h + 90.0;
    let strip_h = 22.0;
    let height = strip_top + strips.len() as f64 * strip_h + 60.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">Leadership over the benchmark run (bars = leading), Rust (orange) vs client-go (blue)</text>"#
    );
    // Time axis.
    let minutes = (span / 60e9).ceil() as i64;
    let step = if minutes > 20 { 5 } else { 1 };
    for m in (0..=minutes).step_by(step as usize) {
        let x = x_of(t0 + m * 60_000_000_000);
        if x > left + plot_w + 1.0 {
            break;
        }
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{m} min</text>"##,
            top + gantt_h,
            top - 6.0
        );
    }
    for (i, (row, imp)) in rows.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            left - 6.0,
            y + row_h - 4.0,
            imp.color(),
            esc(row)
        );
        for b in bars.iter().filter(|b| b.row == *row) {
            let x0 = x_of(b.start);
            let x1 = x_of(b.end).max(x0 + 1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" opacity="0.85"/>"#,
                y + 2.0,
                x1 - x0,
                row_h - 4.0,
                b.imp.color()
            );
        }
    }
    // Strip plot, log scale 1 ms .. 100 s.
    let _ = writeln!(
        s,
        r#"<text x="10" y="{:.1}" font-size="15" font-weight="bold">Handover latency per repetition (log scale; signal sent → standby started leading)</text>"#,
        strip_top - 40.0
    );
    let (lo, hi) = (0.0f64, 5.0f64); // log10 ms
    let lx = |ms: f64| left + ((ms.max(1.0).log10() - lo) / (hi - lo)).clamp(0.0, 1.0) * plot_w;
    for (d, label) in [
        (1.0, "1 ms"),
        (10.0, "10 ms"),
        (100.0, "100 ms"),
        (1000.0, "1 s"),
        (10000.0, "10 s"),
        (100000.0, "100 s"),
    ] {
        let x = lx(d);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            strip_top - 10.0,
            strip_top + strips.len() as f64 * strip_h,
            strip_top - 14.0
        );
    }
    for (i, (label, imp, xs)) in strips.iter().enumerate() {
        let y = strip_top + i as f64 * strip_h + strip_h / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            left - 6.0,
            y + 4.0,
            imp.color(),
            esc(label)
        );
        for (j, x) in xs.iter().enumerate() {
            let jitter = ((j * 7) % 5) as f64 * 2.0 - 4.0;
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}" opacity="0.7"><title>{x:.1} ms</title></circle>"#,
                lx(*x),
                y + jitter,
                imp.color()
            );
        }
        if !xs.is_empty() {
            let p99 = pct(xs, 99.0);
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="1.5"/>"#,
                lx(p99),
                y - 8.0,
                lx(p99),
                y + 8.0
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{:.1}">Black tick: p99. Dots: one repetition each.</text>"#,
        height - 20.0
    );
    let _ = writeln!(s, "</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_is_well_formed_enough() {
        let mut r = Results::default();
        r.graceful.insert((Imp::Rust, 15), vec![10.0, 20.0]);
        let bars = vec![Bar {
            row: "Rust <a>".into(),
            imp: Imp::Rust,
            start: 0,
            end: 10,
        }];
        let s = svg(&r, &bars, 0, 100);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains("Rust &lt;a&gt;"));
    }
}
