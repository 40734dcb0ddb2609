//! Generated scans with known text, for the OCR tests and benchmarks: pages of text rendered with
//! a real font at a given resolution, turned slightly and speckled as a flatbed scanner does, and
//! saved as image files or as PDFs whose pages are one image each (what a scanner writes).
//!
//! Why generate them: OCR accuracy is only measurable against the exact text on the page, and a
//! test must not depend on files nobody can regenerate.

use std::path::{Path, PathBuf};

use ab_glyph::{Font as _, FontVec, PxScale, ScaleFont};
use image::{GrayImage, Luma};

/// Where Debian (fonts-dejavu-core), Fedora and macOS keep a serif and a sans font.
const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-serif-fonts/DejaVuSerif.ttf",
    "/usr/share/fonts/dejavu/DejaVuSerif.ttf",
    "/Library/Fonts/Arial.ttf",
];

/// The font pages are typeset in.
pub fn load_font() -> Result<FontVec, String> {
    for path in FONT_PATHS {
        if let Ok(bytes) = std::fs::read(path) {
            return FontVec::try_from_vec(bytes).map_err(|e| format!("{path}: {e}"));
        }
    }
    Err(format!("no font for generated scans (looked for {}; on Debian: apt install fonts-dejavu-core)", FONT_PATHS.join(", ")))
}

/// How a page is scanned.
#[derive(Debug, Clone, Copy)]
pub struct ScanSettings {
    pub dpi: u32,
    /// Clockwise, in degrees: a page laid a little askew on the glass.
    pub rotation_degrees: f32,
    /// Standard deviation of the grey-level noise added to every pixel (0: clean).
    pub noise: f32,
    /// Share of pixels turned into dust specks, black or white.
    pub speckle: f32,
    pub seed: u64,
}

impl ScanSettings {
    pub fn clean(dpi: u32) -> Self {
        ScanSettings { dpi, rotation_degrees: 0.0, noise: 0.0, speckle: 0.0, seed: 1 }
    }
    /// A real scanner's look: turned a little, grainy, a few specks.
    pub fn noisy(dpi: u32, seed: u64) -> Self {
        let turn = [0.6, -0.9, 1.2, -0.4][(seed % 4) as usize];
        ScanSettings { dpi, rotation_degrees: turn, noise: 18.0, speckle: 0.0015, seed }
    }
}

/// Letter paper, 12-point text, one-inch margins.
const PAGE_INCHES: (f32, f32) = (8.5, 11.0);
const MARGIN_INCHES: f32 = 1.0;
const FONT_POINTS: f32 = 12.0;

/// `text` typeset on one page at `dpi` (paragraphs split at blank lines, words wrapped to the
/// margins), and the text exactly as it stands on the page, one line per printed line. Text that
/// does not fit on the page is left out of both.
pub fn typeset(font: &FontVec, text: &str, dpi: u32) -> (GrayImage, String) {
    let px = |inches: f32| (inches * dpi as f32).round() as u32;
    let (width, height) = (px(PAGE_INCHES.0), px(PAGE_INCHES.1));
    let mut page = GrayImage::from_pixel(width, height, Luma([255]));
    let scale = PxScale::from(FONT_POINTS / 72.0 * dpi as f32);
    let scaled = font.as_scaled(scale);
    let line_height = (scaled.height() + scaled.line_gap()) * 1.15;
    let left = MARGIN_INCHES * dpi as f32;
    let right = width as f32 - left;
    let bottom = height as f32 - MARGIN_INCHES * dpi as f32;
    let mut y = MARGIN_INCHES * dpi as f32 + scaled.ascent();
    let mut printed = Vec::new();
    let space = scaled.h_advance(font.glyph_id(' '));
    'paragraphs: for paragraph in text.split("\n\n") {
        let mut line = String::new();
        let mut line_width = 0.0;
        let words: Vec<&str> = paragraph.split_whitespace().collect();
        let mut lines = Vec::new();
        for word in words {
            let w: f32 = word.chars().map(|c| scaled.h_advance(font.glyph_id(c))).sum();
            if !line.is_empty() && left + line_width + space + w > right {
                lines.push(std::mem::take(&mut line));
                line_width = 0.0;
            }
            if !line.is_empty() {
                line.push(' ');
                line_width += space;
            }
            line.push_str(word);
            line_width += w;
        }
        if !line.is_empty() {
            lines.push(line);
        }
        for line in lines {
            if y > bottom {
                break 'paragraphs;
            }
            draw_line(font, scale, &mut page, left, y, &line);
            printed.push(line);
            y += line_height;
        }
        y += line_height * 0.5;
    }
    (page, printed.join("\n"))
}

fn draw_line(font: &FontVec, scale: PxScale, page: &mut GrayImage, x: f32, baseline: f32, line: &str) {
    let scaled = font.as_scaled(scale);
    let mut caret = x;
    let mut previous = None;
    for c in line.chars() {
        let id = font.glyph_id(c);
        if let Some(p) = previous {
            caret += scaled.kern(p, id);
        }
        let glyph = id.with_scale_and_position(scale, ab_glyph::point(caret, baseline));
        caret += scaled.h_advance(id);
        previous = Some(id);
        if let Some(outlined) = font.outline_glyph(glyph) {
            let bounds = outlined.px_bounds();
            outlined.draw(|gx, gy, coverage| {
                let (px, py) = (bounds.min.x as i64 + gx as i64, bounds.min.y as i64 + gy as i64);
                if px >= 0 && py >= 0 && (px as u32) < page.width() && (py as u32) < page.height() {
                    let pixel = page.get_pixel_mut(px as u32, py as u32);
                    let ink = (coverage.clamp(0.0, 1.0) * 255.0) as u8;
                    pixel.0[0] = pixel.0[0].min(255 - ink);
                }
            });
        }
    }
}

/// A small deterministic generator (xorshift64*): the same seed gives the same scan.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Roughly normal: the sum of four uniforms, centred and scaled to unit variance.
    fn normal(&mut self) -> f32 {
        ((self.unit() + self.unit() + self.unit() + self.unit()) - 2.0) * 1.732
    }
}

/// What the scanner does to a typeset page: turns it, adds grain and dust.
pub fn scan(page: &GrayImage, settings: &ScanSettings) -> GrayImage {
    let mut out = if settings.rotation_degrees == 0.0 { page.clone() } else { rotate(page, settings.rotation_degrees) };
    if settings.noise > 0.0 || settings.speckle > 0.0 {
        let mut rng = Rng(settings.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for pixel in out.pixels_mut() {
            let speck = rng.unit();
            let v = if speck < settings.speckle / 2.0 {
                0.0
            } else if speck < settings.speckle {
                255.0
            } else {
                pixel.0[0] as f32 + rng.normal() * settings.noise
            };
            pixel.0[0] = v.clamp(0.0, 255.0) as u8;
        }
    }
    out
}

/// `page` turned by `degrees` about its centre, bilinear, white where nothing was.
fn rotate(page: &GrayImage, degrees: f32) -> GrayImage {
    let (w, h) = page.dimensions();
    let (sin, cos) = degrees.to_radians().sin_cos();
    let (cx, cy) = (w as f32 / 2.0, h as f32 / 2.0);
    let sample = |x: i64, y: i64| -> f32 {
        if x < 0 || y < 0 || x >= w as i64 || y >= h as i64 {
            255.0
        } else {
            page.get_pixel(x as u32, y as u32).0[0] as f32
        }
    };
    GrayImage::from_fn(w, h, |x, y| {
        let (dx, dy) = (x as f32 - cx, y as f32 - cy);
        // The source point that lands on (x, y).
        let sx = cos * dx + sin * dy + cx;
        let sy = -sin * dx + cos * dy + cy;
        let (x0, y0) = (sx.floor(), sy.floor());
        let (fx, fy) = (sx - x0, sy - y0);
        let (x0, y0) = (x0 as i64, y0 as i64);
        let top = sample(x0, y0) * (1.0 - fx) + sample(x0 + 1, y0) * fx;
        let bottom = sample(x0, y0 + 1) * (1.0 - fx) + sample(x0 + 1, y0 + 1) * fx;
        Luma([(top * (1.0 - fy) + bottom * fy).round() as u8])
    })
}

/// How a scan page is stored in a PDF.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Encoding {
    /// JPEG (DCTDecode), what most scanners write for grey pages.
    Jpeg { quality: u8 },
    /// Raw 8-bit grey samples, deflated (FlateDecode).
    Flate,
}

/// A PDF whose pages are each one full-page image of `dpi`, and nothing else: no text layer.
pub fn scanned_pdf(pages: &[GrayImage], dpi: u32, encoding: Encoding) -> Vec<u8> {
    pdf_with_scans(None, pages, dpi, encoding)
}

/// A PDF whose first page is typed text (`text`, ASCII, in Helvetica) and whose other pages are
/// scans: a report with scanned appendices.
pub fn text_then_scans_pdf(text: &str, pages: &[GrayImage], dpi: u32, encoding: Encoding) -> Vec<u8> {
    pdf_with_scans(Some(text), pages, dpi, encoding)
}

/// A one-page PDF whose text is drawn as the font's glyph outlines, filled paths with no font
/// and no image: what a design tool's "convert text to outlines" or a vector export writes. Only a
/// renderer can turn it into pixels for OCR. `lines` are set at `points` from the top left.
pub fn vector_text_pdf(font: &FontVec, lines: &[&str], points: f32) -> Vec<u8> {
    use std::fmt::Write as _;
    let scale = points / font.units_per_em().unwrap_or(1000.0);
    let mut path = String::new();
    for (row, line) in lines.iter().enumerate() {
        let (mut x, baseline) = (72.0, 792.0 - 72.0 - points * 1.4 * (row as f32 + 1.0));
        for c in line.chars() {
            let id = font.glyph_id(c);
            if let Some(outline) = font.outline(id) {
                let at = |p: ab_glyph::Point| (x + p.x * scale, baseline + p.y * scale);
                let mut current = None;
                for curve in &outline.curves {
                    use ab_glyph::OutlineCurve::{Cubic, Line, Quad};
                    let start = match curve {
                        Line(a, _) | Quad(a, _, _) | Cubic(a, _, _, _) => *a,
                    };
                    if current != Some(start) {
                        let (sx, sy) = at(start);
                        write!(path, "{sx:.2} {sy:.2} m ").unwrap();
                    }
                    current = Some(match curve {
                        Line(_, b) => {
                            let (bx, by) = at(*b);
                            write!(path, "{bx:.2} {by:.2} l ").unwrap();
                            *b
                        }
                        Quad(a, c, b) => {
                            // A quadratic as the cubic through the same points.
                            let c1 = ab_glyph::point(a.x + (c.x - a.x) * 2.0 / 3.0, a.y + (c.y - a.y) * 2.0 / 3.0);
                            let c2 = ab_glyph::point(b.x + (c.x - b.x) * 2.0 / 3.0, b.y + (c.y - b.y) * 2.0 / 3.0);
                            let ((x1, y1), (x2, y2), (bx, by)) = (at(c1), at(c2), at(*b));
                            write!(path, "{x1:.2} {y1:.2} {x2:.2} {y2:.2} {bx:.2} {by:.2} c ").unwrap();
                            *b
                        }
                        Cubic(_, c1, c2, b) => {
                            let ((x1, y1), (x2, y2), (bx, by)) = (at(*c1), at(*c2), at(*b));
                            write!(path, "{x1:.2} {y1:.2} {x2:.2} {y2:.2} {bx:.2} {by:.2} c ").unwrap();
                            *b
                        }
                    });
                }
                path.push_str("f\n");
            }
            x += font.h_advance_unscaled(id) * scale;
        }
    }
    use crate::pdfgen::{raw_pdf, raw_stream};
    let objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << >> >>".to_vec(),
        raw_stream("", format!("0 g\n{path}").as_bytes()),
    ];
    raw_pdf(&objects, "")
}

fn pdf_with_scans(text_page: Option<&str>, pages: &[GrayImage], dpi: u32, encoding: Encoding) -> Vec<u8> {
    use crate::pdfgen::{raw_pdf, raw_stream};
    let mut objects: Vec<Vec<u8>> = vec![Vec::new(), Vec::new()];
    let mut kids = Vec::new();
    if let Some(text) = text_page {
        let font_id = objects.len() + 1;
        objects.push(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec());
        let escaped: String = text
            .chars()
            .filter(|c| c.is_ascii() && !c.is_ascii_control())
            .map(|c| match c {
                '(' | ')' | '\\' => format!("\\{c}"),
                c => c.to_string(),
            })
            .collect();
        let content_id = objects.len() + 1;
        objects.push(raw_stream("", format!("BT /F1 11 Tf 72 720 Td ({escaped}) Tj ET").as_bytes()));
        let page_id = objects.len() + 1;
        objects.push(
            format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R /Resources << /Font << /F1 {font_id} 0 R >> >> >>")
                .into_bytes(),
        );
        kids.push(page_id);
    }
    for page in pages {
        let (w, h) = page.dimensions();
        let (data, filter) = match encoding {
            Encoding::Jpeg { quality } => (encode_jpeg(page, quality), "/DCTDecode"),
            Encoding::Flate => {
                use std::io::Write;
                let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(page.as_raw()).expect("in memory");
                (z.finish().expect("in memory"), "/FlateDecode")
            }
        };
        let image_id = objects.len() + 1;
        objects.push(raw_stream(
            &format!(" /Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter {filter}"),
            &data,
        ));
        let (pw, ph) = (w as f32 * 72.0 / dpi as f32, h as f32 * 72.0 / dpi as f32);
        let content_id = objects.len() + 1;
        objects.push(raw_stream("", format!("q {pw:.2} 0 0 {ph:.2} 0 0 cm /Scan Do Q").as_bytes()));
        let page_id = objects.len() + 1;
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {pw:.2} {ph:.2}] /Contents {content_id} 0 R \
                 /Resources << /XObject << /Scan {image_id} 0 R >> >> >>"
            )
            .into_bytes(),
        );
        kids.push(page_id);
    }
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>".to_vec();
    let kids_list: String = kids.iter().map(|id| format!("{id} 0 R ")).collect();
    objects[1] = format!("<< /Type /Pages /Kids [{kids_list}] /Count {} >>", kids.len()).into_bytes();
    raw_pdf(&objects, "")
}

pub fn encode_jpeg(page: &GrayImage, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality).encode_image(page).expect("in memory");
    out
}

/// Saves `page` as an image file; the format follows the extension (.png, .jpg, .tif, .webp).
pub fn save_image(page: &GrayImage, path: &Path) -> Result<PathBuf, String> {
    page.save(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

/// Saves `pages` as one TIFF file with a page (image) each, as a fax or a document scanner does.
pub fn save_multipage_tiff(pages: &[GrayImage], path: &Path) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut encoder = tiff::encoder::TiffEncoder::new(std::io::BufWriter::new(file)).map_err(|e| e.to_string())?;
    for page in pages {
        encoder.write_image::<tiff::encoder::colortype::Gray8>(page.width(), page.height(), page.as_raw()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A PNG whose header claims `width` × `height` pixels over a few bytes of data: a decompression
/// bomb's shape, for the tests of the size limit.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut png = Vec::new();
    GrayImage::new(8, 8).write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).expect("in memory");
    // IHDR's width and height are bytes 16..24, its checksum 29..33 (over bytes 12..29).
    png[16..20].copy_from_slice(&width.to_be_bytes());
    png[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Text for a scanned page: a few paragraphs of ordinary prose, different for every `seed`, with
/// the sentence `planted` in the middle.
pub fn page_text(seed: usize, planted: &str) -> String {
    const SENTENCES: [&str; 12] = [
        "The committee met on Tuesday morning to review the quarterly accounts and the plans for the new warehouse.",
        "Several members asked why the heating costs had risen so sharply since the previous winter.",
        "The treasurer explained that the old boiler had failed twice and was replaced in November.",
        "A proposal to extend the opening hours of the library during the examination period was approved.",
        "Volunteers will repaint the fence along the northern edge of the garden before the spring fair.",
        "The secretary reported that forty-two new members had joined since the last general meeting.",
        "Members agreed that the minutes of each meeting should be posted on the notice board within a week.",
        "The insurance policy for the hall is due for renewal at the end of March, at a slightly higher premium.",
        "A letter from the council confirmed that the parking restrictions on Mill Lane will stay as they are.",
        "The chair thanked everyone who had helped with the autumn concert, which raised money for new chairs.",
        "It was noted that the fire exits must be kept clear at all times, including during deliveries.",
        "The next meeting will be held in the small hall, since the main hall is booked for a wedding.",
    ];
    let pick = |i: usize| SENTENCES[(seed * 5 + i * 7) % SENTENCES.len()];
    let first: Vec<&str> = (0..4).map(pick).collect();
    let second: Vec<&str> = (4..8).map(pick).collect();
    format!("{}\n\n{} {}\n\n{}", first.join(" "), second[..2].join(" "), planted, second[2..].join(" "))
}

/// Character accuracy of `recognized` against `truth`: 1 - (edit distance / characters of the
/// truth), both with runs of white space folded to one space. What OCR evaluations report.
pub fn character_accuracy(recognized: &str, truth: &str) -> f64 {
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").chars().collect::<Vec<char>>();
    let (a, b) = (fold(recognized), fold(truth));
    if b.is_empty() {
        return if a.is_empty() { 1.0 } else { 0.0 };
    }
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            row[j + 1] = substitute.min(previous[j + 1] + 1).min(row[j] + 1);
        }
        std::mem::swap(&mut previous, &mut row);
    }
    1.0 - previous[b.len()] as f64 / b.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn character_accuracy_counts_edits_against_the_truth() {
        assert_eq!(character_accuracy("the cat", "the cat"), 1.0);
        assert_eq!(character_accuracy("the  cat\n", "the cat"), 1.0);
        assert!((character_accuracy("the bat", "the cat") - (1.0 - 1.0 / 7.0)).abs() < 1e-9);
        assert!((character_accuracy("", "abcd") - 0.0).abs() < 1e-9);
    }

    #[test]
    fn a_typeset_page_has_ink_where_its_lines_are_and_a_turned_scan_keeps_its_size() {
        let font = load_font().expect("a font (fonts-dejavu-core)");
        let (page, printed) = typeset(&font, &page_text(3, "The violet heron sleeps."), 150);
        assert_eq!(page.dimensions(), (1275, 1650));
        assert!(printed.contains("violet heron"), "{printed}");
        let ink = page.pixels().filter(|p| p.0[0] < 128).count();
        assert!(ink > 10_000, "{ink} dark pixels");
        // Margins stay white.
        assert!(page.enumerate_pixels().filter(|(x, _, _)| *x < 100).all(|(_, _, p)| p.0[0] == 255));
        let scanned = scan(&page, &ScanSettings::noisy(150, 2));
        assert_eq!(scanned.dimensions(), page.dimensions());
        assert_ne!(scanned, page);
    }
}
