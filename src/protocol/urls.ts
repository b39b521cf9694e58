/**
 * The URLs a request names (an image's, a file's): what the API takes. Nothing here fetches them. Pure.
 */
import { WireError } from './errors.js';

/** An http or https URL with a host: what the API fetches. */
export function webUrl(text: string): boolean {
  // Told by its scheme first: a data URL of megabytes is not parsed as a URL to learn it is not a web one.
  if (!/^https?:/i.test(text) || !URL.canParse(text)) return false;
  const url = new URL(text);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
}

/**
 * An image's URL: an http or https URL, or a data URL of an image type (`data:image/png;base64,…`), as
 * ResponseInputImage.image_url says; anything else is refused with the API's words for it.
 */
export function checkImageUrl(text: string, param: string): void {
  if (/^data:image\/[^,;]*(;[^,]*)?,/i.test(text) || webUrl(text)) return;
  const why = /^data:/i.test(text) ? 'a data URL without an image MIME type' : "a value without the 'data:' prefix";
  throw new WireError(
    'invalid_value',
    `Invalid '${param}'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got ${why}.`,
    param,
  );
}
