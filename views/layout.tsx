/** @jsxImportSource hono/jsx */
/** The page shell: head, header with the cloud's connection state, and the htmx assets served locally. */
import { raw } from 'hono/html';
import type { Child } from 'hono/jsx';

/** 4xx responses carry a message to show, so htmx must swap them like any other response. */
const HTMX_CONFIG = JSON.stringify({
  responseHandling: [
    { code: '204', swap: false },
    { code: '[23]..', swap: true },
    { code: '[4]..', swap: true, error: false },
    { code: '[5]..', swap: true, error: true },
  ],
});

/**
 * `signedOut`: a page for someone without the access token, so no links or polling that would need it.
 * `chat`: the edge's pack has a chat template, so the chat is offered.
 */
export function Layout(props: { title: string; children: Child; signedOut?: boolean; chat?: boolean }) {
  return (
    <>
      {/* Without a doctype the browser lays the page out in quirks mode. */}
      {raw('<!DOCTYPE html>')}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <meta name="htmx-config" content={HTMX_CONFIG} />
          <title>{props.title}</title>
          <link rel="icon" href="/assets/favicon.svg" type="image/svg+xml" />
          <link rel="stylesheet" href="/assets/app.css" />
          <script src="/assets/htmx.min.js"></script>
          <script src="/assets/sse.js"></script>
          <script src="/assets/token-details.js" defer></script>
        </head>
        <body>
          <header>
            <h1>Edge token router</h1>
            {props.signedOut ? null : (
              <>
                <nav aria-label="Views">
                  <a href="/">Generate</a>
                  <a href="/compare">Compare</a>
                  {props.chat ? <a href="/chat">Chat</a> : null}
                </nav>
                <span class="cloud-state" hx-get="/fragments/cloud-state" hx-trigger="load, every 3s" hx-swap="innerHTML">
                  cloud: …
                </span>
              </>
            )}
          </header>
          <main>{props.children}</main>
        </body>
      </html>
    </>
  );
}
