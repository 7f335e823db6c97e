//! Apache Parquet: the CSV's columns, typed (times as UTC timestamps, absent values as
//! nulls), zstd-compressed, for DuckDB, pandas and polars. Rows are written in groups
//! of [`GROUP_ROWS`], so memory is bounded by one group whatever the range.

use std::io::Write;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int32Builder, StringBuilder, TimestampNanosecondBuilder,
    UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;

use crate::columns::{Cell, Kind, Row, COLUMNS};
use crate::{Error, FrameRows, Sink};

/// Rows per row group (and per batch built in memory): ~16 K rows of ~30 columns is a
/// few MB, and large enough for DuckDB's scans.
const GROUP_ROWS: usize = 16 * 1024;

enum Builder {
    U32(UInt32Builder),
    U64(UInt64Builder),
    I32(Int32Builder),
    F64(Float64Builder),
    Text(StringBuilder),
    Bool(BooleanBuilder),
    Time(TimestampNanosecondBuilder),
}

impl Builder {
    fn new(kind: Kind) -> Builder {
        match kind {
            Kind::U32 => Builder::U32(UInt32Builder::new()),
            Kind::U64 => Builder::U64(UInt64Builder::new()),
            Kind::I32 => Builder::I32(Int32Builder::new()),
            Kind::F64 => Builder::F64(Float64Builder::new()),
            Kind::Text => Builder::Text(StringBuilder::new()),
            Kind::Bool => Builder::Bool(BooleanBuilder::new()),
            Kind::Time => Builder::Time(TimestampNanosecondBuilder::new().with_timezone("UTC")),
        }
    }

    fn append(&mut self, cell: Cell<'_>) {
        match (self, cell) {
            (Builder::U32(b), Cell::U32(v)) => b.append_value(v),
            (Builder::U64(b), Cell::U64(v)) => b.append_option(v),
            (Builder::I32(b), Cell::I32(v)) => b.append_option(v),
            (Builder::F64(b), Cell::F64(v)) => b.append_option(v),
            (Builder::Text(b), Cell::Text(t)) => b.append_value(kernstat_model::text::printable(t)),
            (Builder::Text(b), Cell::Char(c)) => b.append_value(c.encode_utf8(&mut [0; 4])),
            (Builder::Bool(b), Cell::Bool(v)) => b.append_value(v),
            (Builder::Time(b), Cell::Time(v)) => b.append_option(v.map(|t| t as i64)),
            // columns.rs tests that every cell is of its column's kind.
            _ => unreachable!("a cell of another kind than its column"),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::U32(b) => Arc::new(b.finish()),
            Builder::U64(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
        }
    }
}

fn schema() -> SchemaRef {
    let fields: Vec<Field> = COLUMNS
        .iter()
        .map(|c| {
            let t = match c.kind {
                Kind::U32 => DataType::UInt32,
                Kind::U64 => DataType::UInt64,
                Kind::I32 => DataType::Int32,
                Kind::F64 => DataType::Float64,
                Kind::Text => DataType::Utf8,
                Kind::Bool => DataType::Boolean,
                Kind::Time => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            };
            Field::new(c.name, t, c.nullable)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

pub(crate) struct Parquet<W: Write + Send> {
    writer: Option<ArrowWriter<W>>,
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
}

impl<W: Write + Send> Parquet<W> {
    pub(crate) fn new(out: W) -> Result<Self, Error> {
        let schema = schema();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
            .set_max_row_group_size(GROUP_ROWS)
            .build();
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props))
            .map_err(|e| Error::Encode(e.to_string()))?;
        Ok(Parquet {
            writer: Some(writer),
            schema,
            builders: COLUMNS.iter().map(|c| Builder::new(c.kind)).collect(),
            rows: 0,
        })
    }

    fn flush_batch(&mut self) -> Result<(), Error> {
        if self.rows == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| Error::Encode(e.to_string()))?;
        if let Some(w) = self.writer.as_mut() {
            w.write(&batch).map_err(|e| Error::Encode(e.to_string()))?;
        }
        self.rows = 0;
        Ok(())
    }
}

impl<W: Write + Send> Sink for Parquet<W> {
    fn frame(&mut self, f: &FrameRows<'_>) -> Result<(), Error> {
        for (ps, rates) in f.rows {
            let row = Row {
                time_unix_ns: f.frame.time_unix_ns,
                boot_ns: f.frame.boot_ns,
                interval_s: f.interval_s,
                ps,
                rates,
            };
            for (b, c) in self.builders.iter_mut().zip(COLUMNS) {
                b.append((c.cell)(&row));
            }
            self.rows += 1;
            if self.rows == GROUP_ROWS {
                self.flush_batch()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.flush_batch()?;
        if let Some(w) = self.writer.take() {
            let mut out = w.into_inner().map_err(|e| Error::Encode(e.to_string()))?;
            out.flush()?;
        }
        Ok(())
    }
}
