//! A small PDF writer for documents with known content: the test suite's inputs and the bundled
//! samples (`warpfold make-samples`).
//!
//! Why write PDFs by hand instead of shipping files: the tests must know exactly what text sits on
//! which page, in which font and encoding, and must be able to build broken variants (truncated,
//! encrypted, image-only) byte by byte. Every document here is generated from a seed or from fixed
//! text, so the suite never depends on files from elsewhere.

use std::fmt::Write as _;
use std::io::Write as _;

/// The fonts a generated page can use. Each comes with a different text encoding, so extraction is
/// exercised on several code-to-glyph mappings, not only ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Font {
    /// Helvetica, WinAnsiEncoding: Latin-1 letters and typographic quotes as single bytes.
    Helvetica,
    /// Times-Roman, MacRomanEncoding: accented letters at Mac Roman code points.
    TimesRoman,
    /// Courier with no /Encoding entry: the font's built-in StandardEncoding (ASCII letters only).
    Courier,
    /// Helvetica-Bold with a /Differences array moving the lowercase letters a..z to codes 1..26,
    /// so the content stream holds no readable bytes and extraction must apply the mapping.
    RemappedHelveticaBold,
}

impl Font {
    const ALL: [Font; 4] = [Font::Helvetica, Font::TimesRoman, Font::Courier, Font::RemappedHelveticaBold];

    fn resource_name(self) -> &'static str {
        match self {
            Font::Helvetica => "F1",
            Font::TimesRoman => "F2",
            Font::Courier => "F3",
            Font::RemappedHelveticaBold => "F4",
        }
    }

    fn dictionary(self) -> String {
        match self {
            Font::Helvetica => "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
            Font::TimesRoman => "<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding /MacRomanEncoding >>".into(),
            Font::Courier => "<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>".into(),
            Font::RemappedHelveticaBold => {
                let mut differences = String::from("1");
                for letter in 'a'..='z' {
                    write!(differences, " /{letter}").unwrap();
                }
                format!(
                    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding << /Type /Encoding \
                     /BaseEncoding /WinAnsiEncoding /Differences [{differences}] >> >>"
                )
            }
        }
    }

    /// The byte this font's encoding uses for `c`, if it has one.
    fn encode_char(self, c: char) -> Option<u8> {
        let ascii_ok = |c: char| c.is_ascii_graphic() || c == ' ';
        match self {
            Font::Courier => (ascii_ok(c) && c != '\'' && c != '`').then_some(c as u8),
            Font::RemappedHelveticaBold if c.is_ascii_lowercase() => Some(c as u8 - b'a' + 1),
            Font::Helvetica | Font::RemappedHelveticaBold => match c {
                c if ascii_ok(c) => Some(c as u8),
                '\u{a0}'..='\u{ff}' => Some(c as u32 as u8),
                '€' => Some(0x80),
                '‘' => Some(0x91),
                '’' => Some(0x92),
                '“' => Some(0x93),
                '”' => Some(0x94),
                '–' => Some(0x96),
                '—' => Some(0x97),
                _ => None,
            },
            Font::TimesRoman => match c {
                c if ascii_ok(c) => Some(c as u8),
                'Ä' => Some(0x80),
                'Ç' => Some(0x82),
                'É' => Some(0x83),
                'Ñ' => Some(0x84),
                'Ö' => Some(0x85),
                'Ü' => Some(0x86),
                'á' => Some(0x87),
                'à' => Some(0x88),
                'â' => Some(0x89),
                'ä' => Some(0x8A),
                'ç' => Some(0x8D),
                'é' => Some(0x8E),
                'è' => Some(0x8F),
                'ê' => Some(0x90),
                'í' => Some(0x92),
                'ñ' => Some(0x96),
                'ó' => Some(0x97),
                'ö' => Some(0x9A),
                'ú' => Some(0x9C),
                'ü' => Some(0x9F),
                _ => None,
            },
        }
    }

    /// Whether every character of `text` can be written in this font.
    pub fn can_encode(self, text: &str) -> bool {
        text.chars().all(|c| self.encode_char(c).is_some())
    }
}

/// One run of text in one font, laid out as wrapped lines.
#[derive(Debug, Clone)]
pub struct TextBlock {
    pub font: Font,
    pub text: String,
}

#[derive(Debug, Clone, Default)]
pub struct Page {
    pub blocks: Vec<TextBlock>,
    /// Draws a grey image covering most of the page (a scan has only this, no text).
    pub image: bool,
}

impl Page {
    pub fn text(font: Font, text: impl Into<String>) -> Page {
        Page { blocks: vec![TextBlock { font, text: text.into() }], image: false }
    }
    pub fn image_only() -> Page {
        Page { blocks: Vec::new(), image: true }
    }
}

#[derive(Debug, Clone, Default)]
pub struct PdfDocument {
    pub pages: Vec<Page>,
    /// FlateDecode the content streams (as most real producers do).
    pub compress: bool,
    /// Adds a standard security handler entry that needs a user password nobody knows.
    pub encrypt_with_unknown_password: bool,
}

/// The shape of a document's page tree. Real producers nest /Pages nodes; damaged and hostile files
/// loop or list a page twice, which readers that trust the tree turn into extra pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PageTree {
    /// One /Pages node holding every page.
    #[default]
    Flat,
    /// /Pages nodes of at most `fanout` kids each (at least 2), nested as deep as the page count
    /// needs; the media box and resources sit on the root only and are inherited, as many
    /// producers write them.
    Nested { fanout: usize },
    /// Nested as above, and the /Pages node over the first pages (the root itself when there is
    /// no other) lists the root again at the end of its /Kids: a cycle back to an ancestor.
    Cycle { fanout: usize },
    /// Flat, with the first page listed a second time right after the second page.
    PageTwice,
}

/// How each page's drawing is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Contents {
    /// One content stream per page.
    #[default]
    Single,
    /// A /Contents array of `n` streams (at least 1), the page's lines cut into that many parts
    /// (the text is spread over all of them).
    Split(usize),
    /// A /Contents array whose first stream only paints the page background and is written with
    /// /ASCIIHexDecode (a standard filter that lopdf 0.42 does not decode); the text is in the
    /// second stream.
    HexBackgroundFirst,
    /// A /Contents array whose first stream paints the background and then holds a stray `]` (as
    /// damaged files do; viewers skip it); the text is in the second stream.
    StrayTokenFirst,
}

/// How a document is laid out in the file, beyond its pages' text: see [`PdfDocument::to_bytes_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub tree: PageTree,
    pub contents: Contents,
    /// Words set apart by a TJ displacement instead of a space character, as TeX and many
    /// typesetting programs write them: an extractor must infer the spaces from the positions.
    pub kerned_words: bool,
}

const LINE_CHARS: usize = 88;
const LEADING: f32 = 14.0;
const TOP: f32 = 740.0;
const LEFT: f32 = 56.0;

/// Greedy word wrap at `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn hex_string(font: Font, text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2 + 2);
    out.push('<');
    for c in text.chars() {
        let byte = font.encode_char(c).unwrap_or(b'?');
        write!(out, "{byte:02X}").unwrap();
    }
    out.push('>');
    out
}

/// The page's drawing operators, one line of text (or the image) per entry.
fn content_lines(page: &Page, kerned_words: bool) -> Vec<String> {
    let mut ops = Vec::new();
    if page.image {
        ops.push("q 500 0 0 650 56 80 cm /Im1 Do Q\n".to_string());
    }
    let mut y = TOP;
    for block in &page.blocks {
        for line in wrap(&block.text, LINE_CHARS) {
            let shown = if kerned_words {
                let words: Vec<String> = line.split(' ').map(|word| hex_string(block.font, word)).collect();
                format!("[{}] TJ", words.join(" -300 "))
            } else {
                format!("{} Tj", hex_string(block.font, &line))
            };
            ops.push(format!("BT /{} 10 Tf {LEFT} {y} Td {shown} ET\n", block.font.resource_name()));
            y -= LEADING;
        }
        y -= LEADING / 2.0;
    }
    ops
}

/// The page's content streams' data, in order, as `contents` lays them out.
fn content_streams(page: &Page, layout: Layout) -> Vec<Vec<u8>> {
    const BACKGROUND: &str = "q 1 1 1 rg 0 0 612 792 re f Q\n";
    let lines = content_lines(page, layout.kerned_words);
    match layout.contents {
        Contents::Single => vec![lines.concat().into_bytes()],
        Contents::Split(n) => {
            let per = lines.len().div_ceil(n.max(1)).max(1);
            let mut parts: Vec<Vec<u8>> = lines.chunks(per).map(|c| c.concat().into_bytes()).collect();
            parts.resize(n.max(1), Vec::new());
            parts
        }
        Contents::HexBackgroundFirst => {
            let mut hex = String::new();
            for byte in BACKGROUND.bytes() {
                write!(hex, "{byte:02X}").unwrap();
            }
            hex.push('>');
            vec![hex.into_bytes(), lines.concat().into_bytes()]
        }
        Contents::StrayTokenFirst => vec![format!("{BACKGROUND}] % damaged\n").into_bytes(), lines.concat().into_bytes()],
    }
}

/// A /Pages node of a nested tree.
struct TreeNode {
    id: usize,
    parent: Option<usize>,
    kids: Vec<usize>,
    count: usize,
}

/// Groups `pages` under nodes of at most `fanout` kids until the root can hold the top level.
/// Returns the nodes (root first) and each page's parent.
fn nested_tree(w: &mut Writer, root: usize, pages: &[usize], fanout: usize) -> (Vec<TreeNode>, Vec<usize>) {
    let fanout = fanout.max(2);
    let mut page_parent = vec![root; pages.len()];
    let mut nodes: Vec<TreeNode> = Vec::new();
    // (object id, pages under it, index into nodes or None for a page)
    let mut level: Vec<(usize, usize, Option<usize>)> = (0..pages.len()).map(|i| (pages[i], 1, None)).collect();
    let mut page_index: std::collections::HashMap<usize, usize> = pages.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    while level.len() > fanout {
        let mut next = Vec::new();
        for chunk in level.chunks(fanout) {
            let id = w.reserve();
            let count = chunk.iter().map(|k| k.1).sum();
            for &(kid, _, node) in chunk {
                match node {
                    Some(n) => nodes[n].parent = Some(id),
                    None => page_parent[page_index[&kid]] = id,
                }
            }
            nodes.push(TreeNode { id, parent: None, kids: chunk.iter().map(|k| k.0).collect(), count });
            next.push((id, count, Some(nodes.len() - 1)));
        }
        level = next;
    }
    for &(kid, _, node) in &level {
        match node {
            Some(n) => nodes[n].parent = Some(root),
            None => page_parent[page_index[&kid]] = root,
        }
    }
    page_index.clear();
    let root_node = TreeNode { id: root, parent: None, kids: level.iter().map(|k| k.0).collect(), count: pages.len() };
    nodes.insert(0, root_node);
    (nodes, page_parent)
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// Numbered objects written in order, with the cross-reference table computed from real offsets.
struct Writer {
    objects: Vec<Vec<u8>>,
}

impl Writer {
    fn reserve(&mut self) -> usize {
        self.objects.push(Vec::new());
        self.objects.len()
    }
    fn set(&mut self, id: usize, body: impl Into<Vec<u8>>) {
        self.objects[id - 1] = body.into();
    }
    fn add(&mut self, body: impl Into<Vec<u8>>) -> usize {
        let id = self.reserve();
        self.set(id, body);
        id
    }
    fn stream(&mut self, dict_extra: &str, data: &[u8], compress: bool) -> usize {
        let body =
            if compress { raw_stream(&format!(" /Filter /FlateDecode{dict_extra}"), &deflate(data)) } else { raw_stream(dict_extra, data) };
        self.add(body)
    }
    fn finish(self, root: usize, trailer_extra: &str) -> Vec<u8> {
        let mut out = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
        let mut offsets = Vec::with_capacity(self.objects.len());
        for (i, body) in self.objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(b"\nendobj\n");
        }
        let xref = out.len();
        let mut table = format!("xref\n0 {}\n0000000000 65535 f \n", self.objects.len() + 1);
        for offset in offsets {
            writeln!(table, "{offset:010} 00000 n ").unwrap();
        }
        write!(table, "trailer\n<< /Size {} /Root {root} 0 R{trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n", self.objects.len() + 1)
            .unwrap();
        out.extend_from_slice(table.as_bytes());
        out
    }
}

impl PdfDocument {
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_with(Layout::default())
    }

    /// The document with its page tree and content streams laid out as `layout` says; the pages'
    /// text is the same in every layout.
    pub fn to_bytes_with(&self, layout: Layout) -> Vec<u8> {
        let mut w = Writer { objects: Vec::new() };
        let catalog = w.reserve();
        let pages_id = w.reserve();
        let fonts: Vec<(Font, usize)> = Font::ALL.iter().map(|&f| (f, w.add(f.dictionary()))).collect();
        let font_resources: String = fonts.iter().map(|(f, id)| format!("/{} {id} 0 R ", f.resource_name())).collect();
        let image = if self.pages.iter().any(|p| p.image) {
            // 64x64 8-bit grey gradient: the kind of thing a scanner produces, minus the text.
            let pixels: Vec<u8> = (0..64 * 64).map(|i| ((i % 64) * 4) as u8).collect();
            Some(w.stream(
                " /Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray /BitsPerComponent 8",
                &pixels,
                self.compress,
            ))
        } else {
            None
        };
        let xobjects = |on_page: bool| match (on_page, image) {
            (true, Some(id)) => format!(" /XObject << /Im1 {id} 0 R >>"),
            _ => String::new(),
        };
        let mut contents = Vec::new();
        let mut kids = Vec::new();
        for page in &self.pages {
            let mut ids = Vec::new();
            for (i, data) in content_streams(page, layout).iter().enumerate() {
                let hex_first = i == 0 && layout.contents == Contents::HexBackgroundFirst;
                ids.push(if hex_first { w.stream(" /Filter /ASCIIHexDecode", data, false) } else { w.stream("", data, self.compress) });
            }
            contents.push(if layout.contents == Contents::Single {
                format!("{} 0 R", ids[0])
            } else {
                format!("[{}]", ids.iter().map(|id| format!("{id} 0 R")).collect::<Vec<_>>().join(" "))
            });
            kids.push(w.reserve());
        }
        let refs = |ids: &[usize]| ids.iter().map(|id| format!("{id} 0 R ")).collect::<String>();
        let (nodes, parents) = match layout.tree {
            PageTree::Flat | PageTree::PageTwice => {
                let mut listed = kids.clone();
                if layout.tree == PageTree::PageTwice && !kids.is_empty() {
                    listed.insert(kids.len().min(2), kids[0]);
                }
                (vec![TreeNode { id: pages_id, parent: None, kids: listed, count: kids.len() }], vec![pages_id; kids.len()])
            }
            PageTree::Nested { fanout } | PageTree::Cycle { fanout } => {
                let (mut nodes, parents) = nested_tree(&mut w, pages_id, &kids, fanout);
                if matches!(layout.tree, PageTree::Cycle { .. }) {
                    let looping = if nodes.len() > 1 { 1 } else { 0 };
                    nodes[looping].kids.push(pages_id);
                }
                (nodes, parents)
            }
        };
        // A flat tree keeps the media box and resources on each page (as before); a nested one has
        // them on the root only.
        let nested = matches!(layout.tree, PageTree::Nested { .. } | PageTree::Cycle { .. });
        let resources = |xobjects: String| format!("/Resources << /Font << {font_resources}>>{xobjects} >>");
        for (i, &id) in kids.iter().enumerate() {
            let (media_box, own) = if nested {
                (String::new(), String::new())
            } else {
                (" /MediaBox [0 0 612 792]".to_string(), format!(" {}", resources(xobjects(self.pages[i].image))))
            };
            w.set(id, format!("<< /Type /Page /Parent {} 0 R{media_box} /Contents {}{own} >>", parents[i], contents[i]));
        }
        for node in &nodes {
            let parent = node.parent.map(|p| format!(" /Parent {p} 0 R")).unwrap_or_default();
            let inherited = if node.id == pages_id && nested {
                format!(" /MediaBox [0 0 612 792] {}", resources(xobjects(true)))
            } else {
                String::new()
            };
            w.set(node.id, format!("<< /Type /Pages{parent} /Kids [{}] /Count {}{inherited} >>", refs(&node.kids), node.count));
        }
        w.set(catalog, format!("<< /Type /Catalog /Pages {pages_id} 0 R >>"));
        let mut trailer = String::new();
        if self.encrypt_with_unknown_password {
            // RC4 40-bit standard handler; /O and /U do not derive from the empty password, so a
            // reader must ask for one.
            let o = "7A".repeat(32);
            let u = "3C".repeat(32);
            let encrypt = w.add(format!("<< /Filter /Standard /V 1 /R 2 /O <{o}> /U <{u}> /P -44 >>"));
            write!(trailer, " /Encrypt {encrypt} 0 R /ID [<{0}> <{0}>]", "5A".repeat(16)).unwrap();
        }
        w.finish(catalog, &trailer)
    }
}

/// A PDF of hand-written object bodies (object 1 must be the catalog), with a correct
/// cross-reference table: for building deliberately broken documents.
pub fn raw_pdf(objects: &[Vec<u8>], trailer_extra: &str) -> Vec<u8> {
    let mut w = Writer { objects: Vec::new() };
    for body in objects {
        w.add(body.clone());
    }
    w.finish(1, trailer_extra)
}

/// A stream object body.
pub fn raw_stream(dict_extra: &str, data: &[u8]) -> Vec<u8> {
    let mut body = format!("<< /Length {}{dict_extra} >>\nstream\n", data.len()).into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(b"\nendstream");
    body
}

/// Sentences that identify one page of one generated document, for tests that must find them again.
pub fn planted_sentence(document: usize, page: usize) -> String {
    const SUBJECTS: [&str; 16] = [
        "violet heron",
        "copper lantern",
        "granite owl",
        "amber tramcar",
        "silver fox",
        "cobalt kettle",
        "jade compass",
        "scarlet kite",
        "ivory walrus",
        "bronze beetle",
        "crimson yacht",
        "olive tortoise",
        "saffron balloon",
        "teal accordion",
        "pewter squirrel",
        "coral typewriter",
    ];
    const ACTIONS: [&str; 8] = [
        "counted the lanterns",
        "repaired the umbrellas",
        "painted the fences",
        "weighed the pumpkins",
        "polished the telescopes",
        "folded the maps",
        "tuned the violins",
        "sorted the postcards",
    ];
    const PLACES: [&str; 8] = ["harbour", "monastery", "observatory", "railway yard", "glacier", "bazaar", "lighthouse", "vineyard"];
    // Distinct subjects for documents 0..=2 with pages 0..=4 (k < 16); the other words vary too.
    let k = document * 5 + page;
    format!(
        "The {} {} near the {} at dawn.",
        SUBJECTS[k % SUBJECTS.len()],
        ACTIONS[(k * 3 + document) % ACTIONS.len()],
        PLACES[(k * 5 + page) % PLACES.len()]
    )
}

/// A PDF whose text is set in TrueType fonts embedded whole (Type0, Identity-H, a ToUnicode map of
/// every glyph used), as word processors write documents in any script: `fonts` are font files,
/// `pages` lines of (font index, text) in 12-point type. Glyphs come one per character, unshaped
/// (Arabic and Devanagari show their isolated forms): enough for text extraction, which reads the
/// characters back through the ToUnicode map.
pub fn embedded_font_pdf(fonts: &[&[u8]], pages: &[Vec<(usize, String)>]) -> Result<Vec<u8>, String> {
    use ab_glyph::Font as _;
    let parsed: Vec<ab_glyph::FontRef<'_>> =
        fonts.iter().map(|f| ab_glyph::FontRef::try_from_slice(f).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let mut objects: Vec<Vec<u8>> = vec![Vec::new(), Vec::new()];
    let mut add = |body: Vec<u8>| {
        objects.push(body);
        objects.len()
    };
    // Each font's glyphs in use: glyph id -> the character it stands for.
    let mut used: Vec<std::collections::BTreeMap<u16, char>> = vec![Default::default(); fonts.len()];
    let mut contents = Vec::new();
    for page in pages {
        let mut ops = String::new();
        for (row, (font, text)) in page.iter().enumerate() {
            let face = parsed.get(*font).ok_or_else(|| format!("no font {font}"))?;
            let mut hex = String::new();
            for c in text.chars() {
                let id = face.glyph_id(c).0;
                if id == 0 {
                    return Err(format!("font {font} has no glyph for {c:?}"));
                }
                used[*font].entry(id).or_insert(c);
                write!(hex, "{id:04X}").unwrap();
            }
            let y = 720.0 - 18.0 * row as f32;
            writeln!(ops, "BT /F{font} 12 Tf 72 {y:.1} Td <{hex}> Tj ET").unwrap();
        }
        contents.push(ops);
    }
    let mut font_refs = String::new();
    for (i, (file, face)) in fonts.iter().zip(&parsed).enumerate() {
        let units = face.units_per_em().unwrap_or(1000.0);
        let per_mille = |v: f32| (v * 1000.0 / units).round() as i32;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(file).map_err(|e| e.to_string())?;
        let compressed = z.finish().map_err(|e| e.to_string())?;
        let file_id = add(raw_stream(&format!(" /Length1 {} /Filter /FlateDecode", file.len()), &compressed));
        let (ascent, descent) = (per_mille(face.ascent_unscaled()), per_mille(face.descent_unscaled()));
        let descriptor = add(format!(
            "<< /Type /FontDescriptor /FontName /Embedded{i} /Flags 32 /FontBBox [-1000 {descent} 2000 {ascent}] /ItalicAngle 0 \
                 /Ascent {ascent} /Descent {descent} /CapHeight {ascent} /StemV 80 /FontFile2 {file_id} 0 R >>"
        )
        .into_bytes());
        let widths: String =
            used[i].keys().map(|&id| format!("{id} [{}] ", per_mille(face.h_advance_unscaled(ab_glyph::GlyphId(id))))).collect();
        let cid_font = add(format!(
            "<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Embedded{i} /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) \
                 /Supplement 0 >> /FontDescriptor {descriptor} 0 R /CIDToGIDMap /Identity /W [{widths}] >>"
        )
        .into_bytes());
        let mut cmap = String::from(
            "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) \
             /Supplement 0 >> def /CMapName /Adobe-Identity-UCS def /CMapType 2 def\n1 begincodespacerange <0000> <FFFF> endcodespacerange\n",
        );
        let entries: Vec<(&u16, &char)> = used[i].iter().collect();
        for block in entries.chunks(100) {
            writeln!(cmap, "{} beginbfchar", block.len()).unwrap();
            for (id, c) in block {
                let utf16: String = c.encode_utf16(&mut [0; 2]).iter().map(|u| format!("{u:04X}")).collect();
                writeln!(cmap, "<{id:04X}> <{utf16}>").unwrap();
            }
            cmap.push_str("endbfchar\n");
        }
        cmap.push_str("endcmap CMapName currentdict /CMap defineresource pop end end");
        let to_unicode = add(raw_stream("", cmap.as_bytes()));
        let type0 = add(format!(
            "<< /Type /Font /Subtype /Type0 /BaseFont /Embedded{i} /Encoding /Identity-H /DescendantFonts [{cid_font} 0 R] \
                 /ToUnicode {to_unicode} 0 R >>"
        )
        .into_bytes());
        write!(font_refs, "/F{i} {type0} 0 R ").unwrap();
    }
    let mut kids = Vec::new();
    for ops in &contents {
        let content = add(raw_stream("", ops.as_bytes()));
        kids.push(add(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R /Resources << /Font << {font_refs}>> >> >>"
        )
        .into_bytes()));
    }
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>".to_vec();
    let kids_list: String = kids.iter().map(|id| format!("{id} 0 R ")).collect();
    objects[1] = format!("<< /Type /Pages /Kids [{kids_list}] /Count {} >>", kids.len()).into_bytes();
    Ok(raw_pdf(&objects, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_every_word_in_order() {
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let lines = wrap(text, 12);
        assert!(lines.iter().all(|l| l.chars().count() <= 12), "{lines:?}");
        assert_eq!(lines.join(" "), text);
    }

    #[test]
    fn xref_offsets_point_at_their_objects() {
        let doc = PdfDocument { pages: vec![Page::text(Font::Helvetica, "hello"), Page::image_only()], ..Default::default() };
        let bytes = doc.to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        let xref_at: usize = text.rsplit("startxref\n").next().unwrap().lines().next().unwrap().parse().unwrap();
        let table = &text[xref_at..];
        for (i, line) in table.lines().skip(3).take_while(|l| l.ends_with(" n ")).enumerate() {
            let offset: usize = line[..10].parse().unwrap();
            assert!(text[offset..].starts_with(&format!("{} 0 obj", i + 1)), "object {} not at {offset}", i + 1);
        }
    }

    #[test]
    fn nested_trees_count_their_pages_and_each_page_is_a_kid_of_its_parent() {
        let doc = PdfDocument { pages: (0..10).map(|p| Page::text(Font::Courier, format!("page {p}"))).collect(), ..Default::default() };
        for fanout in [2, 3, 4, 10, 11] {
            let bytes = doc.to_bytes_with(Layout { tree: PageTree::Nested { fanout }, ..Default::default() });
            let pdf = lopdf::Document::load_mem(&bytes).unwrap();
            let pages: Vec<_> = pdf.page_iter().collect();
            assert_eq!(pages.len(), 10, "fan-out {fanout}");
            for id in pages {
                let parent = pdf.get_dictionary(id).unwrap().get(b"Parent").unwrap().as_reference().unwrap();
                let parent = pdf.get_dictionary(parent).unwrap();
                assert!(parent.get(b"Kids").unwrap().as_array().unwrap().iter().any(|k| k.as_reference().ok() == Some(id)));
                assert!(parent.get(b"Kids").unwrap().as_array().unwrap().len() <= fanout);
            }
            let root = pdf.catalog().unwrap().get(b"Pages").unwrap().as_reference().unwrap();
            assert_eq!(pdf.get_dictionary(root).unwrap().get(b"Count").unwrap().as_i64().unwrap(), 10);
        }
    }

    #[test]
    fn fonts_refuse_characters_outside_their_encoding() {
        assert!(Font::Helvetica.can_encode("café “quoted” €5"));
        assert!(!Font::TimesRoman.can_encode("crème brûlée")); // û is not in the table above
        assert!(Font::TimesRoman.can_encode("café à la carte"));
        assert!(!Font::Courier.can_encode("café"));
        assert!(Font::RemappedHelveticaBold.can_encode("Plain Words 42"));
    }
}
