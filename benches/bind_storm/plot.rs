//! The plot of docs/performance.md, drawn by the bench itself: time per
//! pair (wall clock, and the controller's CPU) against N, on a log scale of
//! N, as a PNG. No font or plotting crate: lines, dots and digits (a 3x5
//! pixel font) into an RGB buffer, written as a PNG with stored (not
//! compressed) deflate blocks, which every viewer reads.

use std::path::Path;

const W: usize = 720;
const H: usize = 420;
const LEFT: usize = 70;
const RIGHT: usize = 20;
const TOP: usize = 20;
const BOTTOM: usize = 50;

/// One series: points (N, microseconds per pair), drawn in `color`.
pub(crate) struct Series {
    pub(crate) color: [u8; 3],
    pub(crate) points: Vec<(f64, f64)>,
}

struct Canvas {
    pixels: Vec<u8>,
}

impl Canvas {
    fn new() -> Self {
        Self {
            pixels: vec![255; W * H * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, color: [u8; 3]) {
        if x < 0 || y < 0 || x >= W as i64 || y >= H as i64 {
            return;
        }
        let at = (y as usize * W + x as usize) * 3;
        self.pixels[at..at + 3].copy_from_slice(&color);
    }

    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), color: [u8; 3]) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).max(1);
        for s in 0..=steps {
            let x = x0 + (x1 - x0) * s / steps;
            let y = y0 + (y1 - y0) * s / steps;
            for (dx, dy) in [(0, 0), (1, 0), (0, 1)] {
                self.set(x + dx, y + dy, color);
            }
        }
    }

    fn dot(&mut self, (x, y): (i64, i64), color: [u8; 3]) {
        for dx in -4..=4 {
            for dy in -4..=4 {
                if dx * dx + dy * dy <= 16 {
                    self.set(x + dx, y + dy, color);
                }
            }
        }
    }

    /// Digits (and '.') at (x, y), each 3x5 pixels scaled by 2.
    fn text(&mut self, x: i64, y: i64, text: &str) {
        const FONT: [[u8; 5]; 11] = [
            [7, 5, 5, 5, 7],
            [2, 6, 2, 2, 7],
            [7, 1, 7, 4, 7],
            [7, 1, 7, 1, 7],
            [5, 5, 7, 1, 1],
            [7, 4, 7, 1, 7],
            [7, 4, 7, 5, 7],
            [7, 1, 1, 1, 1],
            [7, 5, 7, 5, 7],
            [7, 5, 7, 1, 7],
            [0, 0, 0, 0, 2],
        ];
        for (i, c) in text.chars().enumerate() {
            let glyph = match c {
                '0'..='9' => FONT[c as usize - '0' as usize],
                '.' => FONT[10],
                _ => continue,
            };
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                            let px = x + i as i64 * 8 + col as i64 * 2 + dx;
                            self.set(px, y + row as i64 * 2 + dy, [0, 0, 0]);
                        }
                    }
                }
            }
        }
    }
}

/// Draws the series into a PNG at `path`: x is log10(N), y is
/// microseconds per pair from 0 to the largest value (rounded up).
pub(crate) fn draw(series: &[Series], path: &Path) -> std::io::Result<()> {
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
    for &(n, y) in points {
        x_min = x_min.min(n.log10().floor());
        x_max = x_max.max(n.log10().ceil());
        y_max = y_max.max(y);
    }
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let y_step = nice_step(y_max / 4.0);
    let y_top = (y_max / y_step).ceil().max(1.0) * y_step;
    let plot_w = (W - LEFT - RIGHT) as f64;
    let plot_h = (H - TOP - BOTTOM) as f64;
    let at = |n: f64, y: f64| {
        let x = LEFT as f64 + (n.log10() - x_min) / (x_max - x_min) * plot_w;
        let y = TOP as f64 + plot_h - y / y_top * plot_h;
        (x.round() as i64, y.round() as i64)
    };
    let mut canvas = Canvas::new();
    let grey = [200, 200, 200];
    let mut tick = 0.0;
    while tick <= y_top + y_step / 2.0 {
        let (_, y) = at(10f64.powf(x_min), tick);
        canvas.line((LEFT as i64, y), ((W - RIGHT) as i64, y), grey);
        canvas.text(8, y - 5, &format!("{tick}"));
        tick += y_step;
    }
    let mut decade = x_min;
    while decade <= x_max {
        let (x, _) = at(10f64.powf(decade), 0.0);
        canvas.line((x, TOP as i64), (x, (H - BOTTOM) as i64), grey);
        let label = format!("{}", 10f64.powf(decade));
        let right_most = (W - 8 * label.len()) as i64;
        canvas.text((x - 16).min(right_most), (H - BOTTOM + 12) as i64, &label);
        decade += 1.0;
    }
    let black = [0, 0, 0];
    canvas.line(
        (LEFT as i64, TOP as i64),
        (LEFT as i64, (H - BOTTOM) as i64),
        black,
    );
    canvas.line(
        (LEFT as i64, (H - BOTTOM) as i64),
        ((W - RIGHT) as i64, (H - BOTTOM) as i64),
        black,
    );
    for s in series {
        let mut sorted = s.points.clone();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in sorted.windows(2) {
            canvas.line(at(pair[0].0, pair[0].1), at(pair[1].0, pair[1].1), s.color);
        }
        for &(n, y) in &sorted {
            canvas.dot(at(n, y), s.color);
        }
    }
    std::fs::write(path, png(&canvas.pixels))
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-9);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * power)
}

/// An 8-bit RGB PNG of the W x H pixels.
fn png(pixels: &[u8]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(H * (W * 3 + 1));
    for row in pixels.chunks(W * 3) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut zlib = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        zlib.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        zlib.extend_from_slice(&len.to_le_bytes());
        zlib.extend_from_slice(&(!len).to_le_bytes());
        zlib.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut header = Vec::new();
    header.extend_from_slice(&(W as u32).to_be_bytes());
    header.extend_from_slice(&(H as u32).to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
