-- What the parser had to leave out or change without failing the document (an image over the
-- pixel limit downscaled, one in a refused format left out, ...): user-facing sentences, shown
-- with the document. Rewritten by every parse.
ALTER TABLE documents ADD COLUMN warnings jsonb NOT NULL DEFAULT '[]'::jsonb;
