/**
 * `bun run client --chat`: a conversation with the edge over gRPC, one line a turn. Each turn sends the whole
 * conversation so far (the edge renders it with its model's chat template, and its prompt cache finds the
 * earlier turns already computed); the assistant's reply, as generated, joins the conversation. `/reset`
 * starts over, `/exit` (or the end of input) ends; a refused turn says why and leaves the conversation as it
 * was. Lines come from readline, so a pipe works as a terminal does.
 */
import { createInterface } from 'node:readline';

export interface ChatMessage {
  role: string;
  content: string;
}

/** Sends one turn and resolves the reply's text once its stream has ended (the caller prints as it streams). */
export type SendTurn = (messages: ChatMessage[]) => Promise<{ text: string }>;

export async function chatInTerminal(send: SendTurn, system?: string): Promise<void> {
  const start = (): ChatMessage[] => (system ? [{ role: 'system', content: system }] : []);
  let messages = start();
  const lines = createInterface({ input: process.stdin, terminal: process.stdin.isTTY === true });
  const prompt = () => process.stdout.write(process.stdin.isTTY ? '> ' : '');
  prompt();
  for await (const line of lines) {
    const said = line.trim();
    if (said === '/exit') break;
    if (said === '/reset') {
      messages = start();
      process.stdout.write('(new conversation)\n');
    } else if (said !== '') {
      const turn = [...messages, { role: 'user', content: said }];
      try {
        const reply = await send(turn);
        messages = [...turn, { role: 'assistant', content: reply.text }];
      } catch (e) {
        // A refused turn (a conversation past the context window, a role the template refuses) leaves the
        // conversation as it was: say why and take the next line.
        const error = e as { details?: string; message?: string };
        process.stdout.write(`\nerror: ${error.details ?? error.message ?? String(e)}\n`);
      }
    }
    prompt();
  }
  lines.close();
}
