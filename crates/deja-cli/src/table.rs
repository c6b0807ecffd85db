//! The one table formatter of the CLI's listings (comfy-table): columns sized to their
//! content, no borders, one space between columns, so output stays easy to read and to grep.
//! Long free text is cut by the callers with [`truncate`].

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, ContentArrangement, Row, Table};

/// A listing with `header`; add rows with [`Listing::row`], print with [`Listing::print`].
pub struct Listing {
    table: Table,
}

impl Listing {
    pub fn new<const N: usize>(header: [&str; N]) -> Listing {
        let mut table = Table::new();
        table
            .load_preset(NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(header);
        for column in table.column_iter_mut() {
            column.set_padding((0, 1));
        }
        Listing { table }
    }

    /// Right-aligns column `index` (numbers).
    pub fn right_aligned(mut self, index: usize) -> Listing {
        if let Some(column) = self.table.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        self
    }

    pub fn row(&mut self, cells: impl Into<Row>) {
        self.table.add_row(cells);
    }

    /// Prints the table (nothing but the header when there are no rows).
    pub fn print(self) {
        println!("{}", crate::terminal::safe(&self.table.trim_fmt()));
    }
}

/// `text` on one line, cut to `max` characters with an ellipsis.
pub fn truncate(text: &str, max: usize) -> String {
    let text = text.replace('\n', " ");
    if text.chars().count() <= max {
        text
    } else {
        format!(
            "{}…",
            text.chars().take(max.saturating_sub(1)).collect::<String>()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_to_the_widest_cell() {
        let mut listing = Listing::new(["ID", "TEAM"]).right_aligned(0);
        listing.row(vec!["7", "checkout"]);
        listing.row(vec!["1234", "db"]);
        let text = listing.table.to_string();
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        assert_eq!(lines.len(), 3, "{text}");
        let team_at = lines[0].find("TEAM").unwrap_or(0);
        assert_eq!(lines[1].find("checkout"), Some(team_at), "{text}");
        assert_eq!(lines[2].find("db"), Some(team_at), "{text}");
        assert!(lines[1].trim_start().starts_with('7'));
    }

    #[test]
    fn long_text_is_cut_on_one_line() {
        assert_eq!(truncate("a\nbcdef", 4), "a b…");
        assert_eq!(truncate("short", 10), "short");
    }
}
