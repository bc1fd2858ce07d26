//! A minimal SVG line chart (log2 x, log10 y), so `tune` can show its curves without a plotting
//! dependency: a few dozen points per chart do not justify one.

use std::fmt::Write as _;

/// One line of a chart: a label and `(x, y)` points with `x > 0`, `y > 0`.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// The points, in x order.
    pub points: Vec<(f64, f64)>,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Renders `series` as an SVG document: x on a log2 axis, y on a log10 axis labelled `y_label`.
#[must_use]
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (760.0, 420.0, 70.0, 190.0, 40.0, 50.0);
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x_min = x_min.min(x.log2());
        x_max = x_max.max(x.log2());
        y_min = y_min.min(y.log10());
        y_max = y_max.max(y.log10());
    }
    if x_min >= x_max {
        x_max = x_min + 1.0;
    }
    y_min = y_min.floor();
    y_max = y_max.ceil().max(y_min + 1.0);
    let px = |x: f64| left + (x.log2() - x_min) / (x_max - x_min) * (w - left - right);
    let py = |y: f64| top + (y_max - y.log10()) / (y_max - y_min) * (h - top - bottom);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" font-size="14" text-anchor="middle">{title}</text>"#,
        (w - right + left) / 2.0
    );
    // Axes and grid.
    let mut decade = y_min;
    while decade <= y_max {
        let y = py(10f64.powf(decade));
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            w - right,
            left - 6.0,
            y + 4.0,
            format_seconds(10f64.powf(decade))
        );
        decade += 1.0;
    }
    let mut xi = x_min.ceil();
    while xi <= x_max {
        let x = px(2f64.powf(xi));
        let _ = writeln!(
            svg,
            r##"<line x1="{x}" x2="{x}" y1="{top}" y2="{}" stroke="#eee"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            h - bottom,
            h - bottom + 16.0,
            2f64.powf(xi)
        );
        xi += 1.0;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{x_label}</text>"#,
        (w - right + left) / 2.0,
        h - 12.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{y_label}</text>"#,
        (h - bottom + top) / 2.0,
        (h - bottom + top) / 2.0
    );
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in &s.points {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        let ly = top + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            w - right + 12.0,
            w - right + 32.0,
            w - right + 38.0,
            ly + 4.0,
            s.label
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.0} s")
    } else if s >= 1e-3 {
        format!("{:.0} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.0} µs", s * 1e6)
    } else {
        format!("{:.0} ns", s * 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_has_one_polyline_per_series_and_labels() {
        let series = vec![
            Series {
                label: "set".into(),
                points: vec![(1.0, 1e-5), (2.0, 8e-6), (4.0, 7e-6)],
            },
            Series {
                label: "override".into(),
                points: vec![(1.0, 2e-3), (2.0, 2.1e-3), (4.0, 2.4e-3)],
            },
        ];
        let svg = line_chart("t", "min_parallel_nodes", "latency", &series);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">override<") && svg.contains("10 µs"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }
}
