//! How deep an XML text nests its elements, checked before hwloc parses
//! it.
//!
//! hwloc's own XML parser (used where `libhwloc-plugins` and its libxml2
//! component are absent or disabled) recurses once per nested element, on
//! the calling thread's stack, with no limit of its own: a file that nests
//! its elements deep enough overflows any stack and aborts the process.
//! So [`Topology::from_xml_file`](super::Topology::from_xml_file) rejects
//! a text nested deeper than [`MAX_XML_DEPTH`] with a typed error first.
//!
//! The scan is a single pass over the bytes that follows what changes the
//! depth: start tags (`<a ...>`; a quoted attribute value may contain
//! `>`), end tags, empty-element tags (`<a .../>`), and the parts that
//! hold no elements (`<?...?>`, comments, `CDATA` sections, the
//! `<!DOCTYPE ...>` declaration with its internal subset). It does not
//! check that the text is well formed: hwloc does that afterwards.

/// The deepest element nesting accepted in a topology XML file. A real
/// machine's topology nests its objects about a dozen deep (machine,
/// package, groups, die, caches, core, PU, plus the `<topology>` element
/// and an `<info>` or `<distances2>` child); this is libxml2's default
/// depth limit, so hwloc's two XML parsers accept the same files.
pub(super) const MAX_XML_DEPTH: usize = 256;

/// The 1-based line of the first element of `xml` that is nested deeper
/// than [`MAX_XML_DEPTH`], or `None` if no element is.
pub(super) fn too_deep_at(xml: &str) -> Option<usize> {
    let b = xml.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(off) = memchr(b'<', &b[i..]) {
        let at = i + off;
        let rest = &b[at..];
        i = if rest.starts_with(b"<?") {
            skip_past(b, at + 2, b"?>")
        } else if rest.starts_with(b"<!--") {
            skip_past(b, at + 4, b"-->")
        } else if rest.starts_with(b"<![CDATA[") {
            skip_past(b, at + 9, b"]]>")
        } else if rest.starts_with(b"<!") {
            skip_declaration(b, at + 2)
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            skip_tag(b, at + 2).0
        } else {
            let (end, empty) = skip_tag(b, at + 1);
            if !empty {
                depth += 1;
                if depth > MAX_XML_DEPTH {
                    return Some(1 + b[..at].iter().filter(|&&c| c == b'\n').count());
                }
            }
            end
        };
    }
    None
}

fn memchr(c: u8, b: &[u8]) -> Option<usize> {
    b.iter().position(|&x| x == c)
}

/// The index just past the first `end` at or after `from` (the length if
/// there is none).
fn skip_past(b: &[u8], from: usize, end: &[u8]) -> usize {
    b[from.min(b.len())..].windows(end.len()).position(|w| w == end).map_or(b.len(), |p| from + p + end.len())
}

/// A tag's end from just after its `<` (or `</`): the index past its `>`
/// (quoted values may hold `>`), and whether it closes itself (`/>`).
fn skip_tag(b: &[u8], from: usize) -> (usize, bool) {
    let mut quote = None;
    let mut prev = 0u8;
    for (k, &c) in b.iter().enumerate().skip(from) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'>' => return (k + 1, prev == b'/'),
            None => {}
        }
        prev = c;
    }
    (b.len(), false)
}

/// A `<!...>` declaration (`DOCTYPE`) from just after its `<!`: the index
/// past its `>`, skipping an internal subset in `[...]` and quoted parts.
fn skip_declaration(b: &[u8], from: usize) -> usize {
    let mut quote = None;
    let mut brackets = 0usize;
    for (k, &c) in b.iter().enumerate().skip(from) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'[' => brackets += 1,
                b']' => brackets = brackets.saturating_sub(1),
                b'>' if brackets == 0 => return k + 1,
                _ => {}
            },
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize, open: &str) -> String {
        let mut s = String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n");
        for _ in 0..depth {
            s.push_str(open);
            s.push('\n');
        }
        for _ in 0..depth {
            s.push_str("</object>");
        }
        s
    }

    #[test]
    fn the_limit_itself_passes_one_more_is_found_on_its_line() {
        assert_eq!(too_deep_at(&nested(MAX_XML_DEPTH, "<object type=\"Misc\">")), None);
        // Line 1 is the declaration, line 2 the DOCTYPE.
        assert_eq!(too_deep_at(&nested(MAX_XML_DEPTH + 1, "<object type=\"Misc\">")), Some(MAX_XML_DEPTH + 3));
    }

    #[test]
    fn what_holds_no_element_does_not_count() {
        let inner =
            "<object a=\"x>y\" b='/>'><info name=\"k\" value=\"v\"/><!-- <a><b><c> --><![CDATA[<d><e>]]></object>";
        let mut s = String::from("<!DOCTYPE t [ <!ELEMENT t ANY> <!ATTLIST t a CDATA \">\"> ]>");
        for _ in 0..MAX_XML_DEPTH - 1 {
            s.push_str("<t>");
        }
        s.push_str(inner);
        assert_eq!(too_deep_at(&s), None, "empty-element tags, comments, CDATA and quoted `>` add no depth");
        s.push_str("<t>");
        assert_eq!(too_deep_at(&s), None, "the <object> was closed: this one is at the limit");
        s.push_str("<t>");
        assert_eq!(too_deep_at(&s), Some(1));
    }

    #[test]
    fn unterminated_text_ends_the_scan() {
        for s in ["<a", "<a b=\"", "<!-- x", "<![CDATA[", "<!DOCTYPE [", "<?xml", "</", ""] {
            assert_eq!(too_deep_at(s), None, "{s:?}");
        }
    }
}
