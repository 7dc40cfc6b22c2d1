//! Answers sized for a context window: every list a tool returns is cut to
//! a byte budget ([`DEFAULT_BUDGET`]), never silently: what is left out is
//! counted (`… and N more in M files`) with the `offset` that shows it.

/// Most bytes of listed lines in one answer (the text the model reads; the
/// structured content carries the same page).
pub const DEFAULT_BUDGET: usize = 4 * 1024;

/// One listed line and the file it is about (for the count of files left out).
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) file: String,
    pub(super) line: String,
}

impl Entry {
    pub(super) fn new(file: impl Into<String>, line: impl Into<String>) -> Entry {
        Entry {
            file: file.into(),
            line: line.into(),
        }
    }
}

/// The part of a list one answer shows: entries `start..end` of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Page {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) total: usize,
}

impl Page {
    /// Entries from `offset` while their lines fit in `budget` bytes (at
    /// least one, so that every page moves on).
    pub(super) fn cut(entries: &[Entry], offset: usize, budget: usize) -> Page {
        let start = offset;
        let mut end = start;
        let mut used = 0;
        for entry in entries.iter().skip(start) {
            let size = entry.line.len() + 1;
            if end > start && used + size > budget {
                break;
            }
            used += size;
            end += 1;
        }
        Page {
            start,
            end,
            total: entries.len(),
        }
    }

    /// Whether entries after this page are left out.
    pub(super) fn more(&self) -> bool {
        self.end < self.total
    }

    /// The page's lines, then a line saying what is left out and how to
    /// see it; `empty` when there is nothing at all.
    pub(super) fn render(&self, entries: &[Entry], empty: &str) -> String {
        if self.total == 0 {
            return format!("{empty}\n");
        }
        let mut text = String::new();
        if self.start >= self.total {
            text.push_str(&format!(
                "offset {} is past the end: there are {} entries\n",
                self.start, self.total
            ));
            return text;
        }
        for entry in &entries[self.start..self.end] {
            text.push_str(&entry.line);
            text.push('\n');
        }
        if let Some(rest) = self.rest(entries) {
            text.push_str(&rest);
            text.push('\n');
        }
        text
    }

    /// `… and N more in M files; ask again with offset=K`, when entries follow the page.
    pub(super) fn rest(&self, entries: &[Entry]) -> Option<String> {
        if !self.more() {
            return None;
        }
        let left = &entries[self.end..];
        Some(rest_line(left.iter().map(|e| e.file.as_str()), self.end))
    }
}

/// What a page left out: `… and N more in M files; ask again with
/// offset=K for the rest`, from the files of the entries left out.
pub(super) fn rest_line<'a>(files: impl Iterator<Item = &'a str>, next: usize) -> String {
    let mut files: Vec<&str> = files.collect();
    let count = files.len();
    files.sort_unstable();
    files.dedup();
    let files = match files.len() {
        1 => "1 file".to_string(),
        n => format!("{n} files"),
    };
    format!("… and {count} more in {files}; ask again with offset={next} for the rest")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| {
                Entry::new(
                    format!("f{}.rs", i % 3),
                    format!("f{}.rs:{i}: {}", i % 3, "x".repeat(40)),
                )
            })
            .collect()
    }

    #[test]
    fn a_long_list_is_cut_at_the_budget_and_says_how_to_see_the_rest() {
        let all = entries(100);
        let page = Page::cut(&all, 0, 1000);
        assert!(page.end > 10 && page.end < 100, "{page:?}");
        let text = page.render(&all, "none");
        assert!(text.len() <= 1000 + 100, "{}", text.len());
        let rest = format!(
            "… and {} more in 3 files; ask again with offset={} for the rest\n",
            100 - page.end,
            page.end
        );
        assert!(text.ends_with(&rest), "{text}");
        // The next page starts where this one ended; the last says nothing more.
        let next = Page::cut(&all, page.end, 1000);
        assert_eq!(next.start, page.end);
        let last = Page::cut(&all, 90, 100_000);
        assert_eq!(last.end, 100);
        assert!(!last.render(&all, "none").contains("more in"));
    }

    #[test]
    fn every_page_shows_at_least_one_entry_and_an_empty_list_says_so() {
        let all = entries(3);
        assert_eq!(Page::cut(&all, 0, 1).end, 1);
        assert_eq!(
            Page::cut(&[], 0, 100).render(&[], "no references found"),
            "no references found\n"
        );
        let past = Page::cut(&all, 7, 100);
        assert!(past
            .render(&all, "none")
            .starts_with("offset 7 is past the end"));
    }
}
